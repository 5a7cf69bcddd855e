//! The adapters' build script: rebuilds the crate when `migrations/`
//! changes. `sqlx::migrate!` embeds that directory at compile time; without
//! this, adding a migration file would not rebuild the crate.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
