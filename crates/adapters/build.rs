//! The adapters' build script: embeds the migration folders in the crate.
//!
//! For each folder (`migrations` for PostgreSQL, `migrations_sqlite`) it
//! writes `$OUT_DIR/migrations.rs`, one list of every
//! `<version>_<description>.sql` file in version order, each file's SQL
//! taken with `include_str!`; `sql/migrations/embedded.rs` includes it. The
//! files are read as `sqlx::migrate!` read them (the version before the
//! first `_`, the rest without `.sql` and with `_` read as a space), so a
//! database moves between this build and one that migrated with sqlx.
//! `rerun-if-changed` on each folder rebuilds the crate when a file is
//! added; without it only the files already listed would be watched.

use std::error::Error;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Each folder and the name of its list in the generated file, with the
/// feature that compiles it (a list no store uses would be dead code).
const FOLDERS: [(&str, &str, &str); 2] = [
    ("migrations", "POSTGRES", "postgres"),
    ("migrations_sqlite", "SQLITE", "sqlite"),
];

fn main() -> Result<(), Box<dyn Error>> {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let mut generated = String::from("// Written by build.rs: the embedded migration folders.\n");
    for (folder, list, feature) in FOLDERS {
        println!("cargo:rerun-if-changed={folder}");
        let migrations = read_folder(&manifest.join(folder))?;
        writeln!(generated, "#[cfg(feature = {feature:?})]")?;
        writeln!(generated, "pub(crate) const {list}: &[Migration] = &[")?;
        for File {
            version,
            description,
            path,
        } in migrations
        {
            let path = path
                .to_str()
                .ok_or_else(|| format!("{} is not UTF-8", path.display()))?;
            writeln!(
                generated,
                "    Migration {{ version: {version}, description: {description:?}, \
                 sql: include_str!({path:?}) }},"
            )?;
        }
        writeln!(generated, "];")?;
    }
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("migrations.rs"), generated)?;
    Ok(())
}

/// One migration file, as sqlx reads its name.
struct File {
    version: i64,
    /// The name after the version, without `.sql`, `_` read as a space.
    description: String,
    path: PathBuf,
}

/// The migrations of `folder` as sqlx 0.8 resolves them
/// (`sqlx_core::migrate::source::resolve_blocking`): every file whose name
/// splits at its first `_` into an integer and a rest ending in `.sql`,
/// other files ignored, sorted by version.
fn read_folder(folder: &Path) -> Result<Vec<File>, Box<dyn Error>> {
    let mut migrations = Vec::new();
    for entry in std::fs::read_dir(folder)? {
        let path = entry?.path();
        if !std::fs::metadata(&path)?.is_file() {
            continue;
        }
        let Some(name) = path.file_name().and_then(|name| name.to_str()) else {
            continue;
        };
        let Some((version, rest)) = name.split_once('_') else {
            continue;
        };
        if !rest.ends_with(".sql") {
            continue;
        }
        // sqlx would read these as the two halves of a reversible
        // migration; this runner applies simple ones only, so a file named
        // so is refused here rather than applied with a wrong description.
        if rest.ends_with(".up.sql") || rest.ends_with(".down.sql") {
            return Err(format!(
                "{}: reversible migrations are not supported",
                path.display()
            )
            .into());
        }
        let version: i64 = version.parse().map_err(|_| {
            format!(
                "{}: expected an integer version before the first `_`",
                path.display()
            )
        })?;
        let description = rest.trim_end_matches(".sql").replace('_', " ");
        migrations.push(File {
            version,
            description,
            path,
        });
    }
    migrations.sort_by_key(|file| file.version);
    // Two files of one version would record one row for two scripts.
    if let Some(pair) = migrations
        .windows(2)
        .find(|pair| pair[0].version == pair[1].version)
    {
        return Err(format!(
            "{} and {} have the same version",
            pair[0].path.display(),
            pair[1].path.display()
        )
        .into());
    }
    Ok(migrations)
}
