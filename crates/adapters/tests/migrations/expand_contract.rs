//! The migration rule (`migrations/README.md`): every migration keeps the
//! statements of the previous release working — expand now, contract in a
//! later release. A statement that could break them (drop, rename, change a
//! type, add a constraint, remove rows, replace a definition) must carry a
//! `-- contract: <why it is safe now>` comment, written just before it or in
//! it; this test fails on any that does not.

use std::path::Path;

use crate::sql_statements::{Statement, statements};
use crate::{migration_files, migration_folders};

/// What `statement` does that the previous release may not survive, if
/// anything.
fn breaking_change(statement: &Statement) -> Option<&'static str> {
    let words: Vec<&str> = statement.words.iter().map(String::as_str).collect();
    let has = |phrase: &[&str]| words.windows(phrase.len()).any(|window| window == phrase);
    let changes_a_column_type = words.windows(4).any(|window| {
        window[0] == "alter"
            && ((window[1] == "column" && window[3] == "type") || window[2] == "type")
            && window[1] != "type"
    });
    // `truncate` empties a table, except as a trigger's event
    // (`after truncate on items`, `after delete or truncate`).
    let truncates = words.iter().enumerate().any(|(at, word)| {
        *word == "truncate" && (at == 0 || !["after", "before", "or"].contains(&words[at - 1]))
    });
    if words.contains(&"drop") {
        Some("drops something the previous release may still use")
    } else if words.contains(&"rename") {
        Some("renames something the previous release still names")
    } else if changes_a_column_type || has(&["set", "data", "type"]) {
        Some("changes a column's type under the previous release's queries")
    } else if has(&["set", "not", "null"]) {
        Some("forbids the nulls the previous release may write")
    } else if has(&["add", "column"]) && has(&["not", "null"]) && !words.contains(&"default") {
        Some("adds a required column that the previous release's inserts leave out")
    } else if [
        "constraint",
        "check",
        "unique",
        "primary",
        "foreign",
        "exclude",
    ]
    .iter()
    .any(|kind| has(&["add", kind]))
        || has(&["create", "unique", "index"])
    {
        Some("adds a constraint that may refuse the previous release's writes")
    } else if truncates || has(&["delete", "from"]) {
        Some("removes rows")
    } else if has(&["or", "replace"]) {
        Some("replaces a definition the previous release relies on")
    } else {
        None
    }
}

/// Whether one of the statement's comments is a `contract:` marker with a
/// reason.
fn is_marked(statement: &Statement) -> bool {
    statement.comments.iter().any(|comment| {
        comment
            .strip_prefix("contract:")
            .is_some_and(|why| !why.trim().is_empty())
    })
}

/// Every unmarked breaking statement of `sql`, as `line: what it does`.
fn unmarked_breaking_changes(sql: &str) -> Vec<String> {
    statements(sql)
        .iter()
        .filter(|statement| !is_marked(statement))
        .filter_map(|statement| {
            breaking_change(statement).map(|what| format!("line {}: {what}", statement.line))
        })
        .collect()
}

#[test]
fn every_migration_keeps_the_previous_release_working_or_says_why_not() {
    let mut failures = Vec::new();
    for folder in migration_folders() {
        for file in migration_files(&folder) {
            let sql = std::fs::read_to_string(&file).unwrap();
            for change in unmarked_breaking_changes(&sql) {
                failures.push(format!("{}, {change}", relative(&file)));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "migrations that may break the previous release (expand now, contract in a later \
         release; mark a contraction with `-- contract: <why it is safe now>`):\n{}",
        failures.join("\n")
    );
}

fn relative(file: &Path) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    file.strip_prefix(root)
        .unwrap_or(file)
        .display()
        .to_string()
}

#[test]
fn each_kind_of_breaking_statement_is_caught() {
    for sql in [
        "drop table items;",
        "alter table items drop column name;",
        "drop view items_readable;",
        "alter table items rename column name to title;",
        "alter table items rename to things;",
        "alter table items alter column name type text;",
        "alter table items alter name type text;",
        "alter table items alter column name set data type text;",
        "alter table items alter column name set not null;",
        "alter table items add column colour text not null;",
        "alter table items add constraint short check (octet_length(name) < 9);",
        "alter table items add unique (name);",
        "create unique index items_name on items (name);",
        "truncate items;",
        "create function f() returns trigger language plpgsql as $$ begin truncate t; end $$;",
        "delete from items where id > 9;",
        "create or replace view items_readable as select id from items;",
        "create function f() returns trigger language plpgsql as $$ begin drop table t; end $$;",
    ] {
        assert_eq!(unmarked_breaking_changes(sql).len(), 1, "not caught: {sql}");
    }
}

#[test]
fn expansions_pass_without_a_marker() {
    let sql = "create table tags (id bigint primary key, label text not null);\n\
               alter table items add column colour text;\n\
               alter table items add column rank integer not null default 0;\n\
               create index items_colour on items (colour);\n\
               create view items_readable as select id from items;\n\
               create trigger t after delete on items for each statement execute function f();\n\
               create trigger u after insert or truncate on items execute function f();\n\
               insert into tags values (1, 'drop table items; rename');\n\
               update items set colour = 'red'; -- drop nothing\n\
               alter type mood add value 'calm';";
    assert_eq!(unmarked_breaking_changes(sql), Vec::<String>::new());
}

#[test]
fn a_contract_marker_with_a_reason_allows_the_statement() {
    let marked = "-- The previous release (0.4) no longer reads `colour`.\n\
                  -- contract: nothing since 0.4 reads items.colour\n\
                  alter table items drop column colour;";
    assert_eq!(unmarked_breaking_changes(marked), Vec::<String>::new());
    let inside = "alter table items /* contract: unused since 0.4 */ drop column colour;";
    assert_eq!(unmarked_breaking_changes(inside), Vec::<String>::new());
    let no_reason = "-- contract:\nalter table items drop column colour;";
    assert_eq!(
        unmarked_breaking_changes(no_reason),
        ["line 2: drops something the previous release may still use"]
    );
    let other_statement = "-- contract: unused\nselect 1;\nalter table items drop column colour;";
    assert_eq!(unmarked_breaking_changes(other_statement).len(), 1);
}
