//! The sweep when a store opens: temporary files a crash left behind go
//! (a crash skips the `Drop` that deletes them, `pending.rs`), and the
//! bytes of the files kept are counted.

use std::io;
use std::path::Path;

use super::names::TEMP_PREFIX;

/// Removes leftover temporary files (those no live writer holds locked)
/// and adds up the sizes of the others.
pub(super) fn sweep_and_count(directory: &Path) -> io::Result<u64> {
    let mut stored: u64 = 0;
    for entry in std::fs::read_dir(directory)? {
        let entry = entry?;
        if entry.file_name().to_string_lossy().starts_with(TEMP_PREFIX) {
            sweep(&entry.path())?;
            continue;
        }
        let metadata = entry.metadata()?;
        if metadata.is_file() {
            stored = stored.saturating_add(metadata.len());
        }
    }
    Ok(stored)
}

/// Removes the temporary file at `path` if its writer is gone: no process
/// holds its lock. One being received by a live writer (of this process or
/// another sharing the directory) is left alone, as is one already gone.
fn sweep(path: &Path) -> io::Result<()> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error),
    };
    match file.try_lock() {
        Ok(()) => match std::fs::remove_file(path) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
            _ => Ok(()),
        },
        Err(std::fs::TryLockError::WouldBlock) => Ok(()),
        Err(std::fs::TryLockError::Error(error)) => Err(error),
    }
}
