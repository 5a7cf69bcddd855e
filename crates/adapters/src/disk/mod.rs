//! The local-disk upload store: files in `UPLOADS_DIR` (C5).
//!
//! [`DiskUploadStore::open_bounded`] opens the directory (created when
//! missing) with a bound on the bytes it holds (`UPLOADS_MAX_BYTES`) and is
//! the service's [`UploadStore`](items_domain::UploadStore);
//! [`usage::describe_metrics`] describes its gauges, which
//! [`DiskUploadStore::record_metrics`] sets when `/metrics` is scraped.
//!
//! A file is received into a temporary file *inside* the uploads directory,
//! named `.upload-<random>`, and renamed to its final 32-hex-character name
//! on commit (`names.rs`). Same directory, so the commit is one atomic
//! `rename` on the same filesystem: a reader never sees half a file under
//! a final name. A pending file that is dropped uncommitted — a failed
//! request, a client that went away, an I/O error — is deleted in `Drop`
//! (`pending.rs`). A crash skips `Drop`, so [`DiskUploadStore::open`]
//! sweeps leftover temporary files at start (`sweep.rs`). The bytes stored
//! are counted against `UPLOADS_MAX_BYTES` ([`usage`]).

mod names;
mod pending;
mod store;
mod sweep;
#[cfg(test)]
mod tests;
pub mod usage;

pub use store::DiskUploadStore;
