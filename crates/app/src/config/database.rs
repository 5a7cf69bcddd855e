//! `DATABASE_URL` (C1, C12): which durable store a URL names, read once. A
//! PostgreSQL URL is read by the store's driver (its host list included),
//! so a URL it cannot use stops the process at start; a SQLite URL names a
//! file:
//!
//! - `sqlite://PATH` or `sqlite:PATH`: the file at PATH, taken literally
//!   (no percent-decoding), relative to the working directory unless it
//!   starts with `/`: `sqlite:///var/lib/items.db` is absolute,
//!   `sqlite://items.db` and `sqlite:items.db` are relative.
//! - `sqlite::memory:` is refused: the in-memory store is what an unset
//!   `DATABASE_URL` gives, and SQLite's own would be a slower copy of it.
//!
//! Anything else is invalid (exit 2 with one line naming the setting).

use std::path::PathBuf;

use items_adapters::postgres::PostgresUrl;

/// The durable store a valid `DATABASE_URL` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseUrl {
    /// `postgres://…` or `postgresql://…`, as the driver read it (boxed:
    /// the driver's settings are large beside a path).
    Postgres(Box<PostgresUrl>),
    /// `sqlite://PATH` or `sqlite:PATH`: the file's path.
    Sqlite(PathBuf),
}

impl DatabaseUrl {
    /// The store `raw` names, or the rule it broke (one line, for the
    /// message naming the setting).
    ///
    /// # Errors
    /// A URL of another scheme, one naming nothing after its scheme, a
    /// SQLite URL naming `:memory:` or with a query string.
    pub fn parse(raw: &str) -> Result<Self, String> {
        if let Some(rest) =
            strip_scheme(raw, "postgres://").or_else(|| strip_scheme(raw, "postgresql://"))
        {
            return match rest.is_empty() {
                true => Err("a PostgreSQL URL must name a server after `://`".to_owned()),
                false => PostgresUrl::parse(raw)
                    .map(|url| Self::Postgres(Box::new(url)))
                    .map_err(|error| error.to_string()),
            };
        }
        let path = strip_scheme(raw, "sqlite://").or_else(|| strip_scheme(raw, "sqlite:"));
        match path {
            None => Err(
                "must be a postgres://, postgresql://, sqlite://PATH or sqlite:PATH URL".to_owned(),
            ),
            Some("") => Err("a SQLite URL must name a file: sqlite://PATH".to_owned()),
            Some(":memory:") => Err(
                "the in-memory store is the default (leave DATABASE_URL unset); sqlite:// needs a file"
                    .to_owned(),
            ),
            Some(path) if path.contains('?') => Err(
                "a SQLite URL takes no parameters (`?…`): the store sets its own".to_owned(),
            ),
            Some(path) => Ok(Self::Sqlite(PathBuf::from(path))),
        }
    }
}

/// `raw` after `scheme` when it starts with it, in any case.
fn strip_scheme<'a>(raw: &'a str, scheme: &str) -> Option<&'a str> {
    raw.get(..scheme.len())
        .filter(|start| start.eq_ignore_ascii_case(scheme))
        .map(|_| &raw[scheme.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sqlite(raw: &str) -> PathBuf {
        match DatabaseUrl::parse(raw) {
            Ok(DatabaseUrl::Sqlite(path)) => path,
            other => panic!("{raw}: {other:?}"),
        }
    }

    #[test]
    fn sqlite_urls_name_a_file_absolute_or_relative_c1_c12() {
        assert_eq!(
            sqlite("sqlite:///var/lib/items.db"),
            PathBuf::from("/var/lib/items.db")
        );
        assert_eq!(sqlite("sqlite://items.db"), PathBuf::from("items.db"));
        assert_eq!(
            sqlite("sqlite://data/items.db"),
            PathBuf::from("data/items.db")
        );
        assert_eq!(sqlite("sqlite:items.db"), PathBuf::from("items.db"));
        assert_eq!(
            sqlite("sqlite:/tmp/items.db"),
            PathBuf::from("/tmp/items.db")
        );
        assert_eq!(sqlite("SQLITE://Items.db"), PathBuf::from("Items.db"));
        assert_eq!(sqlite("sqlite://a b.db"), PathBuf::from("a b.db"));
    }

    #[test]
    fn postgres_urls_are_read_by_the_driver_and_shown_as_written_c1() {
        for url in [
            "postgres://u@h:5432/db",
            "postgresql://localhost/test",
            "postgres://u@h1:5432,h2:5433/db?target_session_attrs=read-write",
        ] {
            match DatabaseUrl::parse(url) {
                Ok(DatabaseUrl::Postgres(parsed)) => assert_eq!(parsed.to_string(), url),
                other => panic!("{url}: {other:?}"),
            }
        }
        assert!(matches!(
            DatabaseUrl::parse("POSTGRES://h"),
            Ok(DatabaseUrl::Postgres(_))
        ));
    }

    #[test]
    fn other_urls_are_refused_in_one_line_c1() {
        for raw in [
            "mysql://x",
            "localhost:5432",
            "postgres://",
            "postgres://h/db?target_session_attrs=sometimes",
            "postgres://h:port/db",
            "sqlite:",
            "sqlite://",
            "sqlite::memory:",
            "sqlite://:memory:",
            "sqlite://items.db?mode=rwc",
            "file:items.db",
            "items.db",
            "",
        ] {
            let reason = DatabaseUrl::parse(raw).expect_err(raw);
            assert!(!reason.contains('\n'), "{reason:?}");
        }
        assert!(
            DatabaseUrl::parse("sqlite::memory:")
                .unwrap_err()
                .contains("in-memory store is the default")
        );
    }
}
