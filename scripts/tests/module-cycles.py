#!/usr/bin/env python3
"""Tests of scripts/module-cycles.py: each plants files in a temporary tree
and runs the script on it. Run: python3 scripts/tests/module-cycles.py"""
import subprocess, sys, tempfile, textwrap, unittest
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "module-cycles.py"


def run(files, lib="pub mod one;\npub mod two;\n"):
    """Exit status and output on a tree of `files`, "x.rs" standing for crates/a/src/x.rs
    (whose lib.rs is `lib` unless given)."""
    with tempfile.TemporaryDirectory() as root:
        if any(not name.startswith(("crates/", "bench/")) for name in files):
            files = {"lib.rs": lib, **files}
        for name, text in files.items():
            path = Path(root) / name if name.startswith(("crates/", "bench/")) else \
                Path(root) / "crates/a/src" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text))
        done = subprocess.run([sys.executable, SCRIPT, root], capture_output=True, text=True)
        return done.returncode, done.stdout + done.stderr


class ModuleCycles(unittest.TestCase):
    def test_a_cycle_is_named_with_what_each_step_takes(self):
        status, output = run({"one.rs": "use crate::two::Two;\n",
                              "two.rs": "use crate::one::{self, One as Uno};\n"})
        self.assertEqual((status, output), (1, "cycle: crates/a/src/one.rs -> "
                         "crates/a/src/two.rs -> crates/a/src/one.rs\n"
                         "  crates/a/src/one.rs -> crates/a/src/two.rs: Two\n"
                         "  crates/a/src/two.rs -> crates/a/src/one.rs: One, one\n"))

    def test_every_kind_of_path_closes_a_cycle(self):
        trees = {
            "super, self": {"one.rs": "use self::inner::X;\nmod inner;\n",
                            "one/inner.rs": "use super::super::two::Two;\n",
                            "two.rs": "use super::one::One;\n"},
            "code paths only": {"one.rs": "fn f() { crate::two::g(); }\n",
                                "two.rs": "pub fn g() -> super::one::One {}\n"},
            "a child in code": {"one.rs": "mod inner;\nfn f() { inner::run(); }\n",
                                "one/inner.rs": "fn run(_: crate::two::T) {}\n",
                                "two.rs": "pub struct T(crate::one::One);\n"},
            "nested groups": {"one.rs": "use crate::{two::{self, x::{Y as Z}}, b};\n",
                              "two.rs": "pub mod x;\n", "two/x.rs": "use crate::one::One;\n"},
            "inline module": {"one.rs": "mod inner { use super::super::two::T; }\n",
                              "two/mod.rs": "fn f(_: crate::one::One) {}\n"},
            "a feature": {"one.rs": '#[cfg(feature = "pg")]\nuse crate::two::T;\n',
                          "two.rs": "use crate::one::One;\n"},
            "Python": {"bench/run.py": "from common import x\n",
                       "bench/common.py": "import run\n"},
            "Python package": {"bench/common.py": "def f():\n    from scenarios.ab import g\n",
                               "bench/scenarios/ab.py": "import common\n"},
            "Python relative": {"bench/s/a.py": "from . import b\n",
                                "bench/s/b.py": "from .a import f\n"},
        }
        for name, files in trees.items():
            with self.subTest(name):
                status, output = run(files)
                self.assertEqual(status, 1, output)
                self.assertIn(("bench/" if "Python" in name else "crates/a/src/two"), output)

    def test_what_is_no_edge_passes(self):
        status, output = run({
            "one.rs": """\
                use crate::two::Two;
                use super::*;
                pub struct One;
                #[cfg(test)]
                #[allow(unused)]
                mod checks { use crate::two::{Two, helper}; fn f() { super::super::two::f(); } }
                #[cfg(test)]
                mod tests_more;
                """,
            "one/tests_more.rs": "use crate::one::One;\n",
            "tests.rs": "use crate::one::One;\n",
            "two.rs": """\
                //! See [`crate::one::One`]. /* crate::one::One */
                /// Unlike [`super::one::One`] ...
                pub struct Two(other::one::One, std::io::Error);
                const A: &str = "use crate::one::One; \\" crate::one::One";
                const B: &str = r#"a "quoted" crate::one::One"#;
                const C: char = '"'; const D: char = '\\'';
                #[cfg(test)]
                pub(crate) fn helper() -> crate::one::One { crate::one::One }
                fn local<'a>(one: &'a str) { let one = 1; }
                """,
            "crates/a/tests/one.rs": "mod two;\nuse two::Two;\n",
            "crates/a/tests/two.rs": "use super::one::One;\n",
            "crates/b/src/main.rs": "mod one;\nfn main() { one::f(); b::one::f(); }\n",
            "crates/b/src/one.rs": "use a::one::One;\n",
            "bench/run.py": "import common\nfrom scenarios import ab\n",
            "bench/common.py": "import os\n",
            "bench/scenarios/__init__.py": "",
            "bench/scenarios/ab.py": "import common\n",
        }, lib="pub mod one;\nmod two;\nmod tests;\npub use one::One;\n")
        self.assertEqual(
            (status, output), (0, "no module cycle (5 Rust files in 2 crates, 4 Python files)\n"))

    def test_unreadable_trees_stop_the_check(self):
        for files in [{"bench/broken.py": "def (:\n"}, {"lib.rs": "mod gone;\n"}]:
            with self.subTest(files):
                status, output = run(files)
                self.assertEqual(status, 2, output)
                self.assertIn("module-cycles:", output)


if __name__ == "__main__":
    unittest.main()
