//! The names of the files in the uploads directory: a stored file's is 32
//! random hex digits, a file being received starts with [`TEMP_PREFIX`].

use std::io;

/// Temporary files start with this; no stored name can (those are hex).
pub(super) const TEMP_PREFIX: &str = ".upload-";

/// 128 bits from the operating system's generator, as 32 lowercase hex digits.
pub(super) fn random_hex() -> io::Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(io::Error::other)?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}
