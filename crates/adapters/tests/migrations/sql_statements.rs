//! A migration cut into its statements, enough to judge what each one does:
//! comments set apart (a statement's marker is one), string literals blanked
//! (a word in a string is data, not SQL), and `$$` bodies kept as code of
//! their statement (a function runs its body later, on the live schema) but
//! never cut at their own `;`.

/// One statement of a migration.
#[derive(Debug, Default)]
pub struct Statement {
    /// The line of the file it starts on (1-based).
    pub line: usize,
    /// Its lowercase words, in order: no comments, no string contents.
    pub words: Vec<String>,
    /// The comments written since the previous statement ended, and in it.
    pub comments: Vec<String>,
}

/// The statements of `sql`, in order; a trailing comment with no statement
/// after it is dropped.
pub fn statements(sql: &str) -> Vec<Statement> {
    let mut cutter = Cutter::default();
    cutter.read(sql, true);
    cutter.finish_statement();
    cutter.statements
}

#[derive(Default)]
struct Cutter {
    statements: Vec<Statement>,
    current: Statement,
    word: String,
    line: usize,
}

impl Cutter {
    /// Reads `sql`; `split` is false inside a `$$` body, whose `;` ends
    /// nothing.
    fn read(&mut self, sql: &str, split: bool) {
        let mut rest = sql;
        while let Some(c) = rest.chars().next() {
            if let Some(after) = rest.strip_prefix("--") {
                let end = after.find('\n').unwrap_or(after.len());
                self.comment(&after[..end]);
                rest = &after[end..];
            } else if let Some(after) = rest.strip_prefix("/*") {
                let end = after.find("*/").map_or(after.len(), |at| at + 2);
                self.comment(after[..end].trim_end_matches("*/"));
                self.count_lines(&after[..end]);
                rest = &after[end..];
            } else if c == '\'' {
                // A literal ends at a quote not doubled ('it''s').
                let mut end = 1;
                loop {
                    match rest[end..].find('\'') {
                        Some(at) if rest[end + at + 1..].starts_with('\'') => end += at + 2,
                        Some(at) => break end += at + 1,
                        None => break end = rest.len(),
                    }
                }
                self.count_lines(&rest[..end]);
                self.end_word();
                rest = &rest[end..];
            } else if let Some((body, after)) = dollar_quoted(rest) {
                self.end_word();
                self.read(body, false);
                self.end_word();
                rest = after;
            } else {
                if c == ';' && split {
                    self.finish_statement();
                } else if c.is_alphanumeric() || c == '_' {
                    self.word.extend(c.to_lowercase());
                } else {
                    self.end_word();
                }
                if c == '\n' {
                    self.line += 1;
                }
                rest = &rest[c.len_utf8()..];
            }
        }
    }

    fn comment(&mut self, text: &str) {
        self.end_word();
        self.current.comments.push(text.trim().to_owned());
    }

    fn count_lines(&mut self, text: &str) {
        self.line += text.matches('\n').count();
    }

    fn end_word(&mut self) {
        if !self.word.is_empty() {
            if self.current.words.is_empty() {
                self.current.line = self.line + 1;
            }
            self.current.words.push(std::mem::take(&mut self.word));
        }
    }

    fn finish_statement(&mut self) {
        self.end_word();
        let statement = std::mem::take(&mut self.current);
        if !statement.words.is_empty() {
            self.statements.push(statement);
        }
    }
}

/// `$tag$body$tag$` at the start of `sql`: the body and what follows;
/// `None` when `sql` does not open a dollar-quoted string.
fn dollar_quoted(sql: &str) -> Option<(&str, &str)> {
    let after_dollar = sql.strip_prefix('$')?;
    let tag_length = after_dollar.find('$')?;
    let tag = &after_dollar[..tag_length];
    let is_tag = tag.chars().all(|c| c.is_alphanumeric() || c == '_')
        && !tag.starts_with(|c: char| c.is_ascii_digit());
    if !is_tag {
        return None;
    }
    let delimiter = &sql[..tag_length + 2];
    let body_and_rest = &sql[delimiter.len()..];
    let body_end = body_and_rest.find(delimiter)?;
    Some((
        &body_and_rest[..body_end],
        &body_and_rest[body_end + delimiter.len()..],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(sql: &str) -> Vec<String> {
        statements(sql)
            .into_iter()
            .map(|statement| statement.words.join(" "))
            .collect()
    }

    #[test]
    fn statements_end_at_semicolons_outside_bodies() {
        let sql = "create function f() returns trigger language plpgsql as $$\n\
                   begin delete from t; return null; end $$;\n\
                   create view v as select 1;";
        assert_eq!(
            words(sql),
            [
                "create function f returns trigger language plpgsql as begin delete from t return null end",
                "create view v as select 1",
            ]
        );
    }

    #[test]
    fn strings_and_comments_are_not_code() {
        let statements = statements(
            "-- drop it all\n/* rename\n too */ insert into t values ('drop table t', 'it''s; gone');\nselect 2;",
        );
        assert_eq!(statements.len(), 2);
        assert_eq!(statements[0].words.join(" "), "insert into t values");
        assert_eq!(statements[0].comments, ["drop it all", "rename\n too"]);
        assert_eq!(statements[1].words, ["select", "2"]);
        assert_eq!(statements[1].line, 4);
    }

    #[test]
    fn a_statement_knows_the_line_it_starts_on() {
        let statements = statements("select 1;\n\n-- why\ncreate\ntable t (a int);");
        assert_eq!(statements[1].line, 4);
        assert_eq!(statements[1].comments, ["why"]);
    }
}
