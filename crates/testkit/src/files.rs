//! What a directory holds, for tests that check which files an upload left
//! behind (C5).

use std::path::Path;

/// The names of the entries of `directory`, sorted.
///
/// # Panics
/// When the directory cannot be read: a test fixture, the test fails.
pub fn listing(directory: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(directory)
        .unwrap_or_else(|error| panic!("read {}: {error}", directory.display()))
        .map(|entry| {
            entry
                .unwrap_or_else(|error| panic!("read {}: {error}", directory.display()))
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_is_the_sorted_names_of_the_entries() {
        let directory =
            std::env::temp_dir().join(format!("items-testkit-files-{}", std::process::id()));
        std::fs::create_dir_all(directory.join("b")).unwrap();
        std::fs::write(directory.join("c"), b"").unwrap();
        std::fs::write(directory.join("a"), b"").unwrap();
        assert_eq!(listing(&directory), ["a", "b", "c"]);
        std::fs::remove_dir_all(&directory).unwrap();
    }
}
