#!/usr/bin/env python3
"""Fail (exit 1) when modules of this repository depend on each other in a cycle.

Checks the Rust files of each crate (crates/*/src: A -> B when A names an item
through a path that resolves to module B) and the Python files of bench/ (or of
the directories given with --python: A -> B when A imports its sibling B).

Deliberately ignored:
- child -> ancestor edges (`use super::X`, `crate::X`): using a parent's items is idiomatic.
- test code (`#[cfg(test)]` items, tests.rs and tests_*.rs files): tests may reach anywhere.
- crates' tests/, benches/ and examples/: each file there is a crate of its own.

Usage: python3 scripts/module-cycles.py [ROOT] [--python DIR ...]
ROOT defaults to this repository. Exit 0: no cycle; 1: cycles, each printed
with the edges inside it and the names each edge takes; 2: bad usage or a
file that cannot be read.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

# An edge between two files and the names the first takes from the second.
Edges = dict[tuple[Path, Path], set[str]]


# --- Rust: lexing ----------------------------------------------------------

RUST_TOKEN = re.compile(
    r"""
      (?P<line_comment>//[^\n]*)
    | (?P<block_comment>/\*)
    | (?P<raw_string>\bb?r(?P<hashes>\#*)")
    | (?P<string>\bb"|")
    | (?P<char>'(?:[^'\\\n]|\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]{1,6}\}|.))')
    """,
    re.VERBOSE,
)
STRING_BODY = re.compile(r'(?:[^"\\]|\\.)*"', re.DOTALL)
BLOCK_COMMENT_EDGE = re.compile(r"/\*|\*/")


def strip_comments_and_strings(source: str, keep_strings: bool = False) -> str:
    """Rust source with comments blanked and string literals emptied to "",
    so that a path in a doc comment or a message is not taken for a use.
    Character literals go too: '"' must not open a string."""
    out = []
    pos = 0
    while match := RUST_TOKEN.search(source, pos):
        out.append(source[pos : match.start()])
        kind = match.lastgroup
        if kind == "line_comment":
            end = match.end()
        elif kind == "block_comment":
            end = block_comment_end(source, match.end())
        elif kind == "raw_string":
            closing = '"' + match.group("hashes")
            found = source.find(closing, match.end())
            end = len(source) if found < 0 else found + len(closing)
        elif kind == "string":
            body = STRING_BODY.match(source, match.end())
            end = body.end() if body else len(source)
        else:  # a character literal
            end = match.end()
        if kind in ("raw_string", "string"):
            out.append(source[match.start() : end] if keep_strings else '""')
        else:
            out.append(" ")
        pos = end
    out.append(source[pos:])
    return "".join(out)


def block_comment_end(source: str, pos: int) -> int:
    """Where the block comment opened just before `pos` ends (they nest)."""
    depth = 1
    while depth:
        edge = BLOCK_COMMENT_EDGE.search(source, pos)
        if not edge:
            return len(source)
        depth += 1 if edge.group() == "/*" else -1
        pos = edge.end()
    return pos


CFG_TEST = re.compile(r"#\[cfg\(\s*test\s*\)\]")
ATTRIBUTE_START = re.compile(r"\s*#\[")


def remove_test_items(code: str) -> str:
    """`code` without the items marked #[cfg(test)] (`mod tests { ... }`,
    test-only helpers, `mod tests;`): tests may reach anywhere."""
    out = []
    pos = 0
    while match := CFG_TEST.search(code, pos):
        out.append(code[pos : match.start()])
        pos = item_end(code, match.end())
    out.append(code[pos:])
    return "".join(out)


def item_end(code: str, pos: int) -> int:
    """The end of the item that starts at `pos` (after its attributes): its
    `;` or the brace closing its body, whichever comes first at depth 0, or
    the end of the block around it (a field or a match arm has neither)."""
    while attribute := ATTRIBUTE_START.match(code, pos):
        pos = closing_bracket(code, attribute.end() - 1, "[]")
    depth = 0
    for index in range(pos, len(code)):
        char = code[index]
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth < 0:
                return index
            if depth == 0 and char == "}":
                return index + 1
        elif char == ";" and depth == 0:
            return index + 1
    return len(code)


def closing_bracket(code: str, pos: int, pair: str) -> int:
    """Just past the bracket that closes the one at `pos`, `pair` being
    the opening and the closing bracket."""
    depth = 0
    for index in range(pos, len(code)):
        depth += {pair[0]: 1, pair[1]: -1}.get(code[index], 0)
        if depth == 0:
            return index + 1
    return len(code)


# --- Rust: modules ---------------------------------------------------------

MOD_DECLARATION = re.compile(r"(?<![\w$])mod\s+(\w+)\s*;")
INLINE_MODULE = re.compile(r"(?<![\w$])mod\s+(\w+)\s*\{")
PATH_ATTRIBUTE = re.compile(
    r'#\[path\s*=\s*"([^"]+)"\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;'
)
MOD_RS_NAMES = {"mod.rs", "lib.rs", "main.rs"}


@dataclass
class RustModule:
    file: Path
    path: tuple[str, ...]  # from the crate root; () is the root itself
    # The file's code (comments, strings and test items removed), split into
    # its top level, at (), and each inline `mod name { ... }`, at (name,).
    scopes: list[tuple[tuple[str, ...], str]]
    children: frozenset[str]  # modules declared here with `mod name;`


def is_test_module(name: str) -> bool:
    return name == "tests" or name.startswith("tests_")


def crate_roots(src: Path) -> list[Path]:
    """lib.rs, main.rs and src/bin/*.rs: each roots a module tree of its own."""
    roots = [src / "lib.rs", src / "main.rs", *sorted(src.glob("bin/*.rs"))]
    return [root for root in roots if root.is_file()]


def module_tree(root: Path) -> dict[tuple[str, ...], RustModule]:
    """The modules reached from `root` through `mod name;` declarations,
    by module path. Test modules are left out, and so are files that no
    `mod` declares (the compiler never sees them)."""
    tree: dict[tuple[str, ...], RustModule] = {}
    pending = [(root, ())]
    while pending:
        file, path = pending.pop()
        if path in tree:
            continue
        source = file.read_text(encoding="utf-8")
        scopes = inline_scopes(remove_test_items(strip_comments_and_strings(source)))
        top_level = scopes[0][1]
        children = {
            name
            for name in MOD_DECLARATION.findall(top_level)
            if not is_test_module(name)
        }
        tree[path] = RustModule(file, path, scopes, frozenset(children))
        moved = {
            name: where
            for where, name in PATH_ATTRIBUTE.findall(
                strip_comments_and_strings(source, keep_strings=True)
            )
        }
        for name in children:
            child = child_file(file, path, name, moved.get(name))
            if child and not is_test_module(child.stem):
                pending.append((child, path + (name,)))
    return tree


def inline_scopes(code: str, inline: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], str]]:
    """(inline module path, its own code) for the code's top level, then for
    each `mod name { ... }` in it: `super::` there starts one level lower."""
    scopes = []
    outer = []
    pos = 0
    while match := INLINE_MODULE.search(code, pos):
        outer.append(code[pos : match.start()])
        end = closing_bracket(code, match.end() - 1, "{}")
        scopes += inline_scopes(code[match.end() : end - 1], inline + (match.group(1),))
        pos = end
    outer.append(code[pos:])
    return [(inline, "".join(outer)), *scopes]


def child_file(parent: Path, parent_path: tuple[str, ...], name: str, moved: str | None) -> Path | None:
    """The file of module `name` declared in `parent`, as rustc looks for it."""
    if moved:
        candidates = [parent.parent / moved]
    else:
        owns_directory = parent.name in MOD_RS_NAMES or not parent_path
        directory = parent.parent if owns_directory else parent.with_suffix("")
        candidates = [directory / f"{name}.rs", directory / name / "mod.rs"]
    return next((candidate for candidate in candidates if candidate.is_file()), None)


# --- Rust: paths -----------------------------------------------------------

USE_STATEMENT = re.compile(r"\buse\s+([^;]*);")
USE_TOKEN = re.compile(r"::|[{},*]|\$?\w+")
CODE_PATH = re.compile(r"(?<![\w:$])\$?[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)+")


def referenced_paths(code: str) -> list[list[str]]:
    """Every path `code` names: each leaf of its use trees, then the
    qualified paths of the rest (`a::b::c`, first segment included)."""
    paths = []

    def take_use(match: re.Match) -> str:
        paths.extend(expand_use_tree(USE_TOKEN.findall(match.group(1))))
        return " "

    rest = USE_STATEMENT.sub(take_use, code)
    for path in CODE_PATH.findall(rest):
        paths.append([segment.strip() for segment in path.split("::")])
    return paths


def expand_use_tree(tokens: list[str]) -> list[list[str]]:
    """`crate::a::{b::C, d, self}` -> [crate a b C], [crate a d], [crate a]."""
    paths: list[list[str]] = []

    def walk(index: int, prefix: list[str]) -> int:
        path = list(prefix)
        while index < len(tokens):
            token = tokens[index]
            if token == "{":
                index += 1
                while index < len(tokens) and tokens[index] != "}":
                    index = walk(index, path)
                    if index < len(tokens) and tokens[index] == ",":
                        index += 1
                return index + 1
            if token in (",", "}"):
                break
            if token == "as":  # the alias is a local name, not a path
                index += 2
                continue
            # `self` inside braces names the prefix itself.
            if token != "::" and not (token == "self" and path):
                path.append(token)
            index += 1
        if path:
            paths.append(path)
        return index

    walk(0, [])
    return paths


def resolve(
    tree: dict[tuple[str, ...], RustModule],
    module: RustModule,
    inline: tuple[str, ...],
    segments: list[str],
) -> tuple[RustModule, str] | None:
    """The deepest module file along `segments` as named from `module` (from
    its inline module `inline`), and the name taken from it; None for a path
    that leaves the crate."""
    start = path_start(module, inline, segments)
    if start is None:
        return None
    current, rest = start
    # An inline module is part of the file that holds it.
    while current not in tree and len(current) > len(module.path):
        current = current[:-1]
    if current not in tree:
        return None
    for segment in rest:
        if current + (segment,) not in tree:
            return tree[current], segment
        current += (segment,)
    return tree[current], segments[-1]


def path_start(
    module: RustModule, inline: tuple[str, ...], segments: list[str]
) -> tuple[tuple[str, ...], list[str]] | None:
    """The module a path starts from and the segments after it."""
    first = segments[0]
    if first in ("crate", "$crate"):
        return (), segments[1:]
    if first in module.children and not inline:
        return module.path, segments
    if first not in ("self", "super"):
        return None  # another crate, or a local name
    base = module.path + inline
    index = 0
    while index < len(segments) and segments[index] in ("self", "super"):
        if segments[index] == "super":
            if not base:
                return None
            base = base[:-1]
        index += 1
    return base, segments[index:]


def rust_edges(tree: dict[tuple[str, ...], RustModule]) -> Edges:
    edges: Edges = defaultdict(set)
    for module in tree.values():
        for inline, code in module.scopes:
            for segments in referenced_paths(code):
                resolved = resolve(tree, module, inline, segments)
                if resolved is None:
                    continue
                target, name = resolved
                # Itself or an ancestor: the prefix test covers both.
                if module.path[: len(target.path)] != target.path:
                    edges[module.file, target.file].add(name)
    return edges


def rust_graph(root: Path) -> tuple[set[Path], Edges, int]:
    """Files, edges and the number of crates under root/crates."""
    files: set[Path] = set()
    edges: Edges = defaultdict(set)
    crates = sorted(path.parent for path in root.glob("crates/*/src") if path.is_dir())
    for crate in crates:
        for crate_root in crate_roots(crate / "src"):
            tree = module_tree(crate_root)
            files.update(module.file for module in tree.values())
            for edge, names in rust_edges(tree).items():
                edges[edge] |= names
    return files, edges, len(crates)


# --- Python ----------------------------------------------------------------


def python_edges(directory: Path) -> tuple[set[Path], Edges]:
    """The .py files of `directory` and their imports of one another."""
    files = {path: path.stem for path in directory.glob("*.py")}
    siblings = {stem: path for path, stem in files.items()}
    edges: Edges = defaultdict(set)
    for file in files:
        tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
        for imported, names in sibling_imports(tree, set(siblings)):
            if siblings[imported] != file:
                edges[file, siblings[imported]] |= names
    return set(files), edges


def sibling_imports(tree: ast.Module, siblings: set[str]):
    """(sibling, names taken) for each import of a sibling module, wherever
    it is (an import inside a function closes a cycle too)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top in siblings:
                    yield top, attributes_taken(tree, alias.asname or top)
        elif isinstance(node, ast.ImportFrom) and node.level <= 1:
            top = (node.module or "").split(".")[0]
            if top in siblings:
                yield top, {alias.name for alias in node.names}
            elif node.level == 1 and not node.module:  # from . import x
                for alias in node.names:
                    if alias.name in siblings:
                        yield alias.name, {alias.name}


def attributes_taken(tree: ast.Module, module_name: str) -> set[str]:
    """What `import x` takes from x: the `x.name`s used, or x itself."""
    names = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == module_name
    }
    return names or {module_name}


# --- cycles ----------------------------------------------------------------


def cycles(files: set[Path], edges: Edges) -> list[list[Path]]:
    """Strongly connected components of more than one file, each sorted.
    Reachability from every file is quadratic, but a few hundred files take
    no time and it reads more plainly than Tarjan."""
    successors: dict[Path, set[Path]] = defaultdict(set)
    for source, target in edges:
        successors[source].add(target)
    reach = {file: reachable(file, successors) for file in files}
    components = []
    placed: set[Path] = set()
    for file in sorted(files):
        if file in placed:
            continue
        component = sorted(other for other in reach[file] if file in reach[other])
        if len(component) > 1:
            components.append(component)
            placed.update(component)
    return components


def reachable(start: Path, successors: dict[Path, set[Path]]) -> set[Path]:
    """Files reachable from `start` in one or more steps."""
    seen: set[Path] = set()
    pending = list(successors[start])
    while pending:
        file = pending.pop()
        if file not in seen:
            seen.add(file)
            pending.extend(successors[file])
    return seen


def report(root: Path, components: list[list[Path]], edges: Edges) -> None:
    def shown(path: Path) -> str:
        return path.relative_to(root).as_posix()

    for component in components:
        print("cycle: " + ", ".join(shown(file) for file in component))
        members = set(component)
        for (source, target), names in sorted(edges.items()):
            if source in members and target in members:
                print(f"  {shown(source)} -> {shown(target)}: {', '.join(sorted(names))}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "root",
        nargs="?",
        type=Path,
        default=Path(__file__).resolve().parent.parent,
        help="the repository (default: the one holding this script)",
    )
    parser.add_argument(
        "--python",
        metavar="DIR",
        nargs="+",
        help="directories of Python files to check, relative to ROOT (default: bench)",
    )
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if args.python:
        python_dirs = [root / name for name in args.python]
        for directory in python_dirs:
            if not directory.is_dir():
                parser.error(f"{directory} is not a directory")
    else:  # a tree without bench/ just has no Python to check
        python_dirs = [root / "bench"] if (root / "bench").is_dir() else []

    try:
        files, edges, crate_count = rust_graph(root)
        python_files: set[Path] = set()
        for directory in python_dirs:
            found, found_edges = python_edges(directory)
            python_files |= found
            edges.update(found_edges)
    except (OSError, UnicodeDecodeError, SyntaxError) as error:
        print(f"module-cycles: {error}", file=sys.stderr)
        return 2

    components = cycles(files | python_files, edges)
    if components:
        report(root, components, edges)
        return 1
    print(
        f"no module cycle ({len(files)} files in {crate_count} crates, "
        f"{len(python_files)} Python files)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
