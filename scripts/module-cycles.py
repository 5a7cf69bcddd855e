#!/usr/bin/env python3
"""Fail when modules depend on each other in a circle, within a Rust crate
(crates/*/src) or among the Python files under bench/ (its root on sys.path).

Rust: A depends on B when A names a path through B, in a `use` tree
(`crate::a::{b, c::D}`, `super::x`, `self::y`) or in code (`crate::a::f()`,
`child::f()`), except a child naming an ancestor; an inline `mod x { }` is part
of its file. Modules behind every feature count (cfg is not read); tests do
not: `#[cfg(test)]` items, tests.rs, tests_*.rs, crates' tests/, benches/,
examples/. Block comments are taken not to nest.

Usage: python3 scripts/module-cycles.py [ROOT]  (default: this repository)
Exit 0: no cycle; 1: a cycle, with the names each step takes (fix it and run
again for the next); 2: a file unread, or a `mod x;` with no file."""
import ast, graphlib, re, sys
from collections import defaultdict
from pathlib import Path

# Comments, raw strings, strings and character literals: blanked first.
NOISE = re.compile(r"//[^\n]*|/\*.*?\*/|r(#*)\".*?\"\1|\"(?:\\.|[^\"\\])*\""
                   r"|'(?:\\(?:u\{\w+\}|x\w\w|.)|[^'\\\n])'", re.S)
MOD_FILE = re.compile(r"(?<![\w$])mod\s+(\w+)\s*;")
MOD_INLINE = re.compile(r"(?<![\w$])mod\s+(\w+)\s*\{")
USE = re.compile(r"\buse\s+([^;]*);")
CODE_PATH = re.compile(r"(?<![\w:$])\$?[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)+")


def past_bracket(code, i):  # just past the bracket closing the one at code[i]
    depth = 0
    for j in range(i, len(code)):
        depth += (code[j] in "([{") - (code[j] in ")]}")
        if depth == 0:
            return j + 1
    return len(code)


def drop_tests(code):
    """`code` without its #[cfg(test)] items, each up to its `;` or its body's `}`."""
    while cfg := re.search(r"#\[cfg\(\s*test\s*\)\]", code):
        i = cfg.end()
        while attribute := re.compile(r"\s*#\[").match(code, i):
            i = past_bracket(code, attribute.end() - 1)
        while i < len(code) and code[i] not in ";)]}" and code[i - 1] != "}":
            i = past_bracket(code, i) if code[i] in "([{" else i + 1
        code = code[: cfg.start()] + " " + code[i + (code[i : i + 1] == ";") :]
    return code


def scopes(code, inline=()):
    """(inline module path, its own code): the top level, then each `mod x { }`."""
    found, outer, pos = [], [], 0
    while module := MOD_INLINE.search(code, pos):
        end = past_bracket(code, module.end() - 1)
        found += scopes(code[module.end() : end - 1], inline + (module[1],))
        outer.append(code[pos : module.start()])
        pos = end
    return [(inline, "".join(outer) + code[pos:]), *found]


def module_tree(root):
    """{module path: (file, scopes, children declared with `mod x;`)}."""
    tree, pending = {}, [(root, ())]
    while pending:
        file, path = pending.pop()
        code = scopes(drop_tests(NOISE.sub(" ", file.read_text(encoding="utf-8"))))
        children = {n for n in MOD_FILE.findall(code[0][1]) if n != "tests" and n[:6] != "tests_"}
        tree[path] = (file, code, children)
        owns_dir = not path or file.name in ("lib.rs", "main.rs", "mod.rs")
        where = file.parent if owns_dir else file.with_suffix("")
        for name in children:
            files = [f for f in (where / f"{name}.rs", where / name / "mod.rs") if f.is_file()]
            if not files:
                raise OSError(f"{file}: no file for `mod {name};` (#[path] is not read)")
            pending.append((files[0], path + (name,)))
    return tree


def use_paths(use):
    """The leaves of a use tree: `a::{b, c::{self, D as E}}` gives a::b, a::c, a::c::D."""
    use = re.sub(r"\s+as\s+\w+|\s+", "", use)
    while group := re.search(r"([\w$:]*)\{([^{}]*)\}", use):  # the innermost, with its prefix
        leaves = ",".join(group[1] + leaf for leaf in group[2].split(",") if leaf)
        use = use[: group.start()] + re.sub(r"::self\b", "", leaves) + use[group.end() :]
    return [leaf.split("::") for leaf in use.split(",") if leaf]


def resolve(tree, path, inline, children, segments):
    """The module a path from `path` (its inline `inline`) leads into, and the name taken."""
    first, base, i = segments[0], path + inline, 0
    if first in ("crate", "$crate"):
        base, i = (), 1
    elif first in children and not inline:
        base = path
    elif first not in ("self", "super"):
        return None  # another crate, or a local name
    while i < len(segments) and segments[i] in ("self", "super"):
        if segments[i] == "super" and not base:
            return None
        base, i = base[:-1] if segments[i] == "super" else base, i + 1
    while base not in tree:  # an inline module is part of its file
        base = base[:-1]
    for segment in segments[i:]:
        if base + (segment,) not in tree:
            return base, segment
        base += (segment,)
    return base, segments[-1]


def rust_edges(crate, edges):
    """The module files of a crate's src/; their edges go into `edges`."""
    files = set()
    for root in [crate / "lib.rs", crate / "main.rs", *sorted(crate.glob("bin/*.rs"))]:
        tree = module_tree(root) if root.is_file() else {}
        for path, (file, code, children) in tree.items():
            files.add(file)
            for inline, text in code:
                paths = [p for use in USE.findall(text) for p in use_paths(use)]
                paths += [re.split(r"\s*::\s*", p) for p in CODE_PATH.findall(USE.sub(" ", text))]
                for target, name in filter(None, (resolve(tree, path, inline, children, p)
                                                  for p in paths)):
                    if path[: len(target)] != target:  # neither itself nor an ancestor
                        edges[file, tree[target][0]].add(name)
    return files


def python_edges(root, edges):
    """The .py files under `root`; their imports of one another go into `edges`."""
    names = {".".join(f.relative_to(root).with_suffix("").parts): f for f in root.rglob("*.py")}
    modules = {name.removesuffix(".__init__"): file for name, file in names.items()}
    for name, file in modules.items():
        package = name if file.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"), str(file))):
            if isinstance(node, ast.Import):
                taken = [(alias.name, alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):  # `from . import x` climbs level - 1
                up = package.split(".")[: package.count(".") + 2 - node.level] if node.level else []
                base = ".".join(up + [node.module or ""]).strip(".")
                taken = [(f"{base}.{a.name}", a.name) for a in node.names]
                taken = [(target if target in modules else base, a) for target, a in taken]
            else:
                continue
            for target, alias in taken:
                if modules.get(target, file) != file:
                    edges[file, modules[target]].add(alias)
    return set(modules.values())


def main(root):
    edges, graph = defaultdict(set), defaultdict(set)
    try:
        if not root.is_dir():
            raise OSError(f"{root} is no directory\n\n{__doc__}")
        crates = sorted(p for p in root.glob("crates/*/src") if p.is_dir())
        rust = set().union(*(rust_edges(crate, edges) for crate in crates))
        python = python_edges(root / "bench", edges) if (root / "bench").is_dir() else set()
        for source, target in sorted(edges):
            graph[source].add(target)
        graphlib.TopologicalSorter(graph).prepare()
    except (OSError, UnicodeDecodeError, SyntaxError) as error:
        print(f"module-cycles: {error}", file=sys.stderr)
        return 2
    except graphlib.CycleError as error:  # its cycle lists each file before the ones it needs
        cycle = error.args[1][::-1]
        print("cycle: " + " -> ".join(file.relative_to(root).as_posix() for file in cycle))
        for source, target in zip(cycle, cycle[1:]):
            names = ", ".join(sorted(edges[source, target]))
            print(f"  {source.relative_to(root)} -> {target.relative_to(root)}: {names}")
        return 1
    print(f"no module cycle ({len(rust)} Rust files in {len(crates)} crates, "
          f"{len(python)} Python files)")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if sys.argv[1:] else Path(__file__).parents[1]).resolve()))
