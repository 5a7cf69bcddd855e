#!/usr/bin/env python3
"""Tests of scripts/module-cycles.py: each builds a tiny fake repository in a
temporary directory, runs the script on it and reads what it prints.

Run: python3 scripts/tests/module-cycles.py
"""

import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "module-cycles.py"


class ModuleCycles(unittest.TestCase):
    def setUp(self):
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        self.root = Path(directory.name)

    def write(self, files: dict[str, str]) -> None:
        for name, text in files.items():
            path = self.root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text))

    def run_script(self, *options: str) -> tuple[int, str]:
        done = subprocess.run(
            [sys.executable, str(SCRIPT), str(self.root), *options],
            capture_output=True,
            text=True,
            check=False,
        )
        self.assertEqual(done.stderr, "")
        return done.returncode, done.stdout

    def assert_clean(self) -> str:
        status, output = self.run_script()
        self.assertEqual(status, 0, output)
        self.assertTrue(output.startswith("no module cycle ("), output)
        return output

    def assert_cycles(self, expected: str) -> None:
        status, output = self.run_script()
        self.assertEqual(output, textwrap.dedent(expected).lstrip("\n"))
        self.assertEqual(status, 1)

    # --- Rust cycles ---

    def test_two_files_naming_each_other_through_crate_paths(self):
        self.write(
            {
                "crates/a/src/lib.rs": "mod one;\nmod two;\n",
                "crates/a/src/one.rs": "use crate::two::Two;\npub struct One;\n",
                "crates/a/src/two.rs": "use crate::one::{self, One};\npub struct Two;\n",
            }
        )
        self.assert_cycles(
            """
            cycle: crates/a/src/one.rs, crates/a/src/two.rs
              crates/a/src/one.rs -> crates/a/src/two.rs: Two
              crates/a/src/two.rs -> crates/a/src/one.rs: One, one
            """
        )

    def test_siblings_naming_each_other_through_super(self):
        self.write(
            {
                "crates/a/src/lib.rs": "mod store;\n",
                "crates/a/src/store/mod.rs": "mod reader;\nmod writer;\n",
                "crates/a/src/store/reader.rs": "use super::writer::Write;\n",
                "crates/a/src/store/writer.rs": "use super::reader::Read;\n",
            }
        )
        self.assert_cycles(
            """
            cycle: crates/a/src/store/reader.rs, crates/a/src/store/writer.rs
              crates/a/src/store/reader.rs -> crates/a/src/store/writer.rs: Write
              crates/a/src/store/writer.rs -> crates/a/src/store/reader.rs: Read
            """
        )

    def test_paths_in_an_inline_module_start_from_it(self):
        self.write(
            {
                "crates/a/src/lib.rs": "mod store;\n",
                "crates/a/src/store/mod.rs": "mod reader;\nmod writer;\n",
                "crates/a/src/store/reader.rs": """\
                    pub struct Read;
                    mod inner {
                        use super::Read;
                        fn write() { super::super::writer::Write; }
                    }
                    """,
                "crates/a/src/store/writer.rs": "pub struct Write(super::reader::Read);\n",
            }
        )
        self.assert_cycles(
            """
            cycle: crates/a/src/store/reader.rs, crates/a/src/store/writer.rs
              crates/a/src/store/reader.rs -> crates/a/src/store/writer.rs: Write
              crates/a/src/store/writer.rs -> crates/a/src/store/reader.rs: Read
            """
        )

    def test_a_cycle_through_qualified_paths_in_code_only(self):
        self.write(
            {
                "crates/a/src/lib.rs": "pub mod one;\npub mod two;\n",
                # `inner::run()`: a path through a child module declared here.
                "crates/a/src/one.rs": """\
                    mod inner;
                    pub struct One;
                    pub fn start() { inner::run(); }
                    """,
                "crates/a/src/one/inner.rs": """\
                    pub fn run() -> super::One {
                        let _ = crate::two::Two::new;
                        super::One
                    }
                    """,
                "crates/a/src/two.rs": """\
                    pub struct Two;
                    impl Two {
                        pub fn new(_: crate::one::One) -> Self { Two }
                    }
                    """,
            }
        )
        self.assert_cycles(
            """
            cycle: crates/a/src/one/inner.rs, crates/a/src/one.rs, crates/a/src/two.rs
              crates/a/src/one/inner.rs -> crates/a/src/two.rs: Two
              crates/a/src/one.rs -> crates/a/src/one/inner.rs: run
              crates/a/src/two.rs -> crates/a/src/one.rs: One
            """
        )

    def test_nested_brace_imports(self):
        self.write(
            {
                "crates/a/src/lib.rs": "mod redis;\nmod http;\n",
                "crates/a/src/redis/mod.rs": "pub mod coalesce;\npub mod decisions;\n",
                "crates/a/src/redis/coalesce.rs": "pub struct Answer;\n",
                "crates/a/src/redis/decisions.rs": """\
                    use crate::{
                        http::{self, edge::{Edge as Door, Layer}},
                        redis::coalesce::*,
                    };
                    """,
                "crates/a/src/http/mod.rs": "pub mod edge;\n",
                "crates/a/src/http/edge.rs": "use crate::redis::decisions::Taken;\n",
            }
        )
        self.assert_cycles(
            """
            cycle: crates/a/src/http/edge.rs, crates/a/src/redis/decisions.rs
              crates/a/src/http/edge.rs -> crates/a/src/redis/decisions.rs: Taken
              crates/a/src/redis/decisions.rs -> crates/a/src/http/edge.rs: Edge, Layer
            """
        )

    def test_a_path_attribute_is_followed(self):
        self.write(
            {
                "crates/a/src/lib.rs": '#[path = "elsewhere/one.rs"]\nmod one;\nmod two;\n',
                "crates/a/src/elsewhere/one.rs": "use crate::two::Two;\n",
                "crates/a/src/two.rs": "use crate::one::One;\n",
            }
        )
        self.assert_cycles(
            """
            cycle: crates/a/src/elsewhere/one.rs, crates/a/src/two.rs
              crates/a/src/elsewhere/one.rs -> crates/a/src/two.rs: Two
              crates/a/src/two.rs -> crates/a/src/elsewhere/one.rs: One
            """
        )

    # --- what is not a cycle ---

    def test_children_naming_their_ancestors_make_no_cycle(self):
        self.write(
            {
                "crates/a/src/lib.rs": """\
                    pub mod sqlite;
                    pub use sqlite::writer::Write;
                    pub struct Config;
                    """,
                "crates/a/src/sqlite/mod.rs": """\
                    pub mod writer;
                    pub use self::writer::{Write, Written};
                    pub const WRITES_PER_COMMIT: usize = 8;
                    """,
                "crates/a/src/sqlite/writer.rs": """\
                    use super::WRITES_PER_COMMIT;
                    use super::super::Config;
                    pub fn write(config: crate::Config) -> usize {
                        crate::sqlite::WRITES_PER_COMMIT
                    }
                    """,
            }
        )
        self.assertEqual(
            self.assert_clean(), "no module cycle (3 files in 1 crates, 0 Python files)\n"
        )

    def test_test_modules_may_name_anything(self):
        self.write(
            {
                "crates/a/src/lib.rs": "mod one;\nmod two;\nmod tests_support;\n",
                "crates/a/src/tests_support.rs": "use crate::one::One;\n",
                "crates/a/src/one.rs": """\
                    use crate::two::Two;
                    use crate::tests_support::fixture;
                    pub struct One;
                    #[cfg(test)]
                    mod tests {
                        use crate::one::One;
                        use crate::two::{Two, helper};
                        #[test]
                        fn works() { crate::two::helper(); }
                    }
                    #[cfg(test)]
                    mod tests_more;
                    """,
                "crates/a/src/one/tests_more.rs": "use crate::one::One;\n",
                "crates/a/src/two.rs": """\
                    pub struct Two;
                    #[cfg(test)]
                    #[path = "two_checks.rs"]
                    mod checks;
                    #[cfg(test)]
                    pub(crate) fn helper() -> crate::one::One { crate::one::One }
                    mod tests;
                    fn check() { tests::check(); }
                    """,
                "crates/a/src/two_checks.rs": "use crate::one::One;\n",
                "crates/a/src/two/tests.rs": "use crate::one::One;\n",
            }
        )
        self.assert_clean()

    def test_paths_in_comments_and_strings_are_no_edges(self):
        self.write(
            {
                "crates/a/src/lib.rs": "mod one;\nmod two;\n",
                "crates/a/src/one.rs": "use crate::two::Two;\n",
                "crates/a/src/two.rs": """\
                    //! Module docs: see [`crate::one::One`].
                    // use crate::one::One;
                    /* a block /* nested: crate::one::One */ still a comment
                       use crate::one::One; */
                    /// Unlike [`super::one::One`], ...
                    pub struct Two;
                    const QUOTE: char = '"';
                    const A: &str = "use crate::one::One; \\" crate::one::One";
                    const B: &str = r"crate::one::One";
                    const C: &str = r#"a "quoted" crate::one::One"#;
                    const D: &[u8] = b"crate::one::One";
                    fn f<'a>(x: &'a str) -> &'a str { x }
                    """,
            }
        )
        self.assert_clean()

    def test_other_crates_and_local_names_are_no_edges(self):
        self.write(
            {
                "crates/a/src/lib.rs": "pub mod one;\n",
                "crates/a/src/one.rs": "pub struct One;\n",
                "crates/b/src/lib.rs": "mod one;\nmod two;\n",
                "crates/b/src/one.rs": "use a::one::One;\nuse std::io;\n",
                "crates/b/src/two.rs": "fn f() { let _ = one::One; io::stdout(); }\n",
                "crates/b/src/main.rs": "mod two;\nfn main() { b::one::f(); }\n",
            }
        )
        self.assertEqual(
            self.assert_clean(), "no module cycle (6 files in 2 crates, 0 Python files)\n"
        )

    def test_tests_benches_and_examples_are_left_out(self):
        self.write(
            {
                "crates/a/src/lib.rs": "pub mod one;\n",
                "crates/a/src/one.rs": "pub struct One;\n",
                "crates/a/tests/one.rs": "mod two;\nuse two::Two;\n",
                "crates/a/tests/two.rs": "use super::one::One;\n",
                "crates/a/benches/b.rs": "mod c;\n",
                "crates/a/examples/e.rs": "mod c;\n",
            }
        )
        self.assert_clean()

    # --- Python ---

    def test_a_python_import_cycle(self):
        self.write(
            {
                "bench/ab.py": "from run import Server, wrk\n",
                "bench/run.py": """\
                    import interleaved

                    def main():
                        interleaved.in_turns()
                        return interleaved.quartiles([])
                    """,
                "bench/interleaved.py": """\
                    import os

                    def in_turns():
                        from .ab import started_servers
                    """,
                "bench/scale.py": "from interleaved import in_turns\nfrom . import sqlite\n",
                "bench/sqlite.py": "import scale\n",
            }
        )
        self.assert_cycles(
            """
            cycle: bench/ab.py, bench/interleaved.py, bench/run.py
              bench/ab.py -> bench/run.py: Server, wrk
              bench/interleaved.py -> bench/ab.py: started_servers
              bench/run.py -> bench/interleaved.py: in_turns, quartiles
            cycle: bench/scale.py, bench/sqlite.py
              bench/scale.py -> bench/sqlite.py: sqlite
              bench/sqlite.py -> bench/scale.py: scale
            """
        )

    def test_python_directories_can_be_chosen(self):
        self.write(
            {
                "bench/a.py": "import b\n",
                "bench/b.py": "import a\n",
                "tools/c.py": "import d\n",
                "tools/d.py": "import os\n",
            }
        )
        status, output = self.run_script("--python", "tools")
        self.assertEqual(
            (status, output), (0, "no module cycle (0 files in 0 crates, 2 Python files)\n")
        )

    def test_a_python_file_that_does_not_parse_stops_the_check(self):
        self.write({"bench/broken.py": "def (:\n"})
        done = subprocess.run(
            [sys.executable, str(SCRIPT), str(self.root)],
            capture_output=True,
            text=True,
            check=False,
        )
        self.assertEqual(done.returncode, 2)
        self.assertIn("broken.py", done.stderr)

    # --- a clean tree ---

    def test_a_clean_tree_passes(self):
        self.write(
            {
                "crates/a/src/lib.rs": "pub mod one;\npub mod two;\npub use one::One;\n",
                "crates/a/src/one.rs": "use crate::two::Two;\npub struct One(Two);\n",
                "crates/a/src/two.rs": "pub struct Two;\n",
                "crates/b/src/main.rs": "mod cli;\nfn main() { cli::run(); }\n",
                "crates/b/src/cli.rs": "pub fn run() {}\n",
                "bench/run.py": "import service\n",
                "bench/service.py": "import os\n",
            }
        )
        self.assertEqual(
            self.assert_clean(), "no module cycle (5 files in 2 crates, 2 Python files)\n"
        )


if __name__ == "__main__":
    unittest.main()
