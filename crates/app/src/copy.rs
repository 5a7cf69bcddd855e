//! `items-service copy --from URL --to URL` (C12): the wiring of the
//! domain's `copy_store` to the store adapters the two URLs name, with a
//! progress line on stderr and the counts at the end.
//!
//! Exit statuses: 0 copied; 1 the copy failed or the destination is not
//! empty (the destination is left as it was); 2 invalid arguments, with one
//! line. Stop every service using the destination before copying into it:
//! the copy holds its write lock until it commits.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::config::{CopyArgs, DatabaseUrl};
use items_adapters::postgres::{PostgresSink, PostgresSnapshot};
use items_adapters::report::ErrorChain;
use items_adapters::sqlite::{SqliteSink, SqliteSnapshot};
use items_domain::transfer::{Copied, Counts, SnapshotSource, StoreSink, copy_store};

/// Rows per batch: read, held and written together. Memory holds about one
/// batch, whatever the size of the store.
const BATCH: usize = 10_000;
/// At most one progress line this often.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

impl DatabaseUrl {
    /// Whether both name the same store (a SQLite file by its resolved path).
    fn same_as(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Sqlite(one), Self::Sqlite(two)) => resolved(one) == resolved(two),
            (Self::Postgres(one), Self::Postgres(two)) => one == two,
            _ => false,
        }
    }
}

/// `path` made absolute, through symbolic links where it exists.
fn resolved(path: &Path) -> PathBuf {
    path.canonicalize()
        .or_else(|_| std::path::absolute(path))
        .unwrap_or_else(|_| path.to_owned())
}

/// Runs the copy on a runtime of its own and returns the exit status.
pub fn main(args: &CopyArgs) -> ExitCode {
    if args.from.same_as(&args.to) {
        eprintln!("items-service: --from and --to name the same store");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("items-service: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(copy(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(line) => {
            eprintln!("items-service: {line}");
            ExitCode::FAILURE
        }
    }
}

/// Opens the source, then the destination, copies, and prints the counts.
async fn copy(args: &CopyArgs) -> Result<(), String> {
    let started = Instant::now();
    // The source first: a source that cannot be read must not leave a new
    // destination file behind.
    let mut source = open_source(&args.from).await?;
    let created = match &args.to {
        DatabaseUrl::Sqlite(path) => (!path.exists()).then(|| path.clone()),
        DatabaseUrl::Postgres(_) => None,
    };
    let outcome = async {
        let mut sink = open_sink(&args.to).await?;
        let mut lines = ProgressLines::new(started);
        let mut progress = |counts: Counts| {
            if let Some(line) = lines.line(counts, Instant::now()) {
                eprintln!("{line}");
            }
        };
        copy_store(&mut *source, &mut *sink, BATCH, &mut progress)
            .await
            .map_err(|error| format!("copy failed: {}", ErrorChain(&error)))
    }
    .await;
    match outcome {
        Ok(Copied { counts, counters }) => {
            println!(
                "items-service: copied {} items and {} products in {:.1} s; \
                 next ids: item {}, product {}",
                counts.items,
                counts.products,
                started.elapsed().as_secs_f64(),
                counters.items.saturating_add(1),
                counters.products.saturating_add(1),
            );
            Ok(())
        }
        Err(line) => {
            if let Some(path) = created {
                remove_store_file(&path);
            }
            Err(line)
        }
    }
}

/// The progress lines of a copy: at most one per [`PROGRESS_EVERY`].
struct ProgressLines {
    started: Instant,
    last: Instant,
}

impl ProgressLines {
    fn new(started: Instant) -> Self {
        Self {
            started,
            last: started,
        }
    }

    /// The line to print for `counts` at `now`, if one is due.
    fn line(&mut self, counts: Counts, now: Instant) -> Option<String> {
        if now.duration_since(self.last) < PROGRESS_EVERY {
            return None;
        }
        self.last = now;
        Some(format!(
            "items-service: copying: {} items, {} products so far ({:.1} s)",
            counts.items,
            counts.products,
            now.duration_since(self.started).as_secs_f64()
        ))
    }
}

async fn open_source(url: &DatabaseUrl) -> Result<Box<dyn SnapshotSource>, String> {
    Ok(match url {
        DatabaseUrl::Sqlite(path) => {
            Box::new(SqliteSnapshot::open(path).await.map_err(cannot_read)?)
        }
        DatabaseUrl::Postgres(url) => {
            Box::new(PostgresSnapshot::open(url).await.map_err(cannot_read)?)
        }
    })
}

async fn open_sink(url: &DatabaseUrl) -> Result<Box<dyn StoreSink>, String> {
    Ok(match url {
        DatabaseUrl::Sqlite(path) => Box::new(SqliteSink::open(path).await.map_err(cannot_write)?),
        DatabaseUrl::Postgres(url) => {
            Box::new(PostgresSink::open(url).await.map_err(cannot_write)?)
        }
    })
}

fn cannot_read(error: impl std::error::Error + 'static) -> String {
    format!("cannot read the source: {}", ErrorChain(&error))
}

fn cannot_write(error: impl std::error::Error + 'static) -> String {
    format!("cannot write the destination: {}", ErrorChain(&error))
}

/// A SQLite file the failed copy created is removed with its journal, so
/// the destination is as it was: absent.
fn remove_store_file(path: &Path) {
    let mut paths = vec![path.to_owned()];
    for suffix in ["-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        paths.push(PathBuf::from(name));
    }
    for path in paths {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_progress_line_is_due_at_most_once_a_second_c12() {
        let started = Instant::now();
        let mut lines = ProgressLines::new(started);
        let at = |millis| started + Duration::from_millis(millis);
        let counts = Counts {
            items: 20_000,
            products: 0,
        };

        assert_eq!(lines.line(counts, at(500)), None);
        assert_eq!(
            lines.line(counts, at(1_200)).as_deref(),
            Some("items-service: copying: 20000 items, 0 products so far (1.2 s)")
        );
        assert_eq!(lines.line(counts, at(2_100)), None);
        assert!(lines.line(counts, at(2_250)).is_some());
    }

    #[test]
    fn two_spellings_of_one_file_are_the_same_store_c12() {
        let one = DatabaseUrl::parse("sqlite://items.db").unwrap();
        let two = DatabaseUrl::parse("sqlite:./items.db").unwrap();
        let other = DatabaseUrl::parse("sqlite:other.db").unwrap();

        assert!(one.same_as(&two));
        assert!(!one.same_as(&other));
        assert!(!one.same_as(&DatabaseUrl::parse("postgres://h/items.db").unwrap()));
    }
}
