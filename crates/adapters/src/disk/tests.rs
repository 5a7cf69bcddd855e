//! What only a disk store does; the upload-store contract every store
//! obeys runs from `tests/contract` (the kit's `upload_store` checks).

use std::io;

use items_domain::UploadStore;
use items_testkit::files::listing;

use super::pending;
use super::store::DiskUploadStore;

#[test]
fn opening_creates_the_directory_and_sweeps_stale_temporary_files_c5() {
    let parent = tempfile::tempdir().unwrap();
    let directory = parent.path().join("nested/uploads");
    std::fs::create_dir_all(&directory).unwrap();
    std::fs::write(directory.join(".upload-0123"), b"left by a crash").unwrap();
    std::fs::write(directory.join("0123456789abcdef0123456789abcdef"), b"kept").unwrap();

    DiskUploadStore::open(&directory).unwrap();

    assert_eq!(listing(&directory), ["0123456789abcdef0123456789abcdef"]);
    assert!(DiskUploadStore::open(parent.path().join("fresh")).is_ok());
}

#[test]
fn opening_counts_the_bytes_already_stored_but_not_stale_temporary_files_c5() {
    let directory = tempfile::tempdir().unwrap();
    std::fs::write(directory.path().join(".upload-0123"), [0u8; 500]).unwrap();
    std::fs::write(directory.path().join("a"), [0u8; 1_000]).unwrap();
    std::fs::write(directory.path().join("b"), [0u8; 234]).unwrap();
    std::fs::create_dir(directory.path().join("not-a-file")).unwrap();

    let store = DiskUploadStore::open_bounded(directory.path(), 2_000).unwrap();

    assert_eq!(store.stored_bytes(), 1_234);
}

#[tokio::test]
async fn a_write_past_the_bound_is_full_and_dropping_gives_its_bytes_back_c5() {
    let directory = tempfile::tempdir().unwrap();
    let store = DiskUploadStore::open_bounded(directory.path(), 100).unwrap();
    let mut upload = store.begin().await.unwrap();
    upload.write(&[1; 60]).await.unwrap();

    let refused = upload.write(&[1; 41]).await.unwrap_err();

    assert!(refused.is_full());
    assert_eq!(store.stored_bytes(), 60);
    drop(upload);
    assert_eq!(store.stored_bytes(), 0);
    assert!(listing(directory.path()).is_empty());
}

#[tokio::test]
async fn a_store_opening_on_a_shared_directory_leaves_a_live_writers_file_alone_c12() {
    let directory = tempfile::tempdir().unwrap();
    let receiving = DiskUploadStore::open(directory.path()).unwrap();
    let mut upload = receiving.begin().await.unwrap();
    upload.write(b"the first half").await.unwrap();
    std::fs::write(directory.path().join(".upload-0123"), b"left by a crash").unwrap();

    // Another instance starts on the same directory: its sweep.
    DiskUploadStore::open(directory.path()).unwrap();

    let temporary: Vec<String> = listing(directory.path());
    assert_eq!(
        temporary.len(),
        1,
        "only the crash's leftover went: {temporary:?}"
    );
    assert_ne!(temporary[0], ".upload-0123");
    upload.write(b", the second").await.unwrap();
    let name = upload.commit().await.unwrap();
    assert_eq!(
        std::fs::read(directory.path().join(name.as_str())).unwrap(),
        b"the first half, the second"
    );
}

#[tokio::test]
async fn a_file_swept_before_its_writer_locked_it_is_made_again() {
    let directory = tempfile::tempdir().unwrap();
    let file = directory.path().join(".upload-taken");
    std::fs::write(&file, b"").unwrap();
    let open = std::fs::File::open(&file).unwrap();
    std::fs::remove_file(&file).unwrap();

    assert!(!pending::still_named(&open, &file).unwrap());
    std::fs::write(&file, b"another").unwrap();
    assert!(!pending::still_named(&open, &file).unwrap());
    let reopened = std::fs::File::open(&file).unwrap();
    assert!(pending::still_named(&reopened, &file).unwrap());
}

#[tokio::test]
async fn committed_bytes_stay_counted_until_removed_c5() {
    let directory = tempfile::tempdir().unwrap();
    let store = DiskUploadStore::open_bounded(directory.path(), 100).unwrap();
    let mut upload = store.begin().await.unwrap();
    upload.write(&[1; 70]).await.unwrap();
    let name = upload.commit().await.unwrap();
    assert_eq!(store.stored_bytes(), 70);

    store.remove(&name).await.unwrap();
    store.remove(&name).await.unwrap();

    assert_eq!(store.stored_bytes(), 0);
}

#[test]
fn a_full_disk_or_quota_is_full_other_errors_are_not_c5() {
    // Linux: ENOSPC 28, EDQUOT 122, EFBIG 27, EACCES 13.
    for full in [28, 122, 27] {
        assert!(pending::failed(io::Error::from_raw_os_error(full)).is_full());
    }
    assert!(!pending::failed(io::Error::from_raw_os_error(13)).is_full());
}

#[test]
fn a_directory_that_is_a_file_cannot_be_opened() {
    let file = tempfile::NamedTempFile::new().unwrap();
    assert!(DiskUploadStore::open(file.path()).is_err());
}
