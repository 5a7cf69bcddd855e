//! The upload-store contract: the MUST sentences of
//! [`UploadStore`] and [`PendingUpload`](items_domain::PendingUpload) (C4, C5).
//!
//! The port has no way to read a file back, so the checks look at the store
//! through [`UploadStoreFixture::contents`]: everything the store holds right
//! now, committed or not. Run them all with
//! [`contract_tests!`](crate::contract_tests).

use std::collections::BTreeMap;
use std::future::Future;

use items_domain::UploadStore;

use crate::Fixture;
use crate::answer::Answer;

/// A store under test, and a look behind its port: what
/// `contract_tests!(upload_store …)` builds once per check.
pub trait UploadStoreFixture: Fixture {
    /// The store, empty when the check starts.
    fn store(&self) -> &dyn UploadStore;

    /// Every file the store holds now, by the name it is held under, with
    /// its bytes: committed files and anything kept while receiving (a disk
    /// store's temporary files), so a check can see what is left behind.
    fn contents(&self) -> impl Future<Output = BTreeMap<String, Vec<u8>>> + Send;
}

/// C5: a committed file holds exactly the bytes written, in order, under
/// the name `commit` returned (32 hex characters, C4), and nothing else is
/// left.
pub async fn a_committed_upload_holds_exactly_the_written_bytes_under_its_name_c4_c5(
    fixture: &impl UploadStoreFixture,
) {
    let mut upload = fixture.store().begin().await.answer("begin an upload");
    for chunk in [&b"hello "[..], b"", b"world"] {
        upload
            .write(chunk)
            .await
            .answer(format_args!("write {:?}", String::from_utf8_lossy(chunk)));
    }
    let name = upload.commit().await.answer("commit the upload");

    let contents = fixture.contents().await;

    assert_eq!(
        contents,
        BTreeMap::from([(name.as_str().to_owned(), b"hello world".to_vec())]),
        "C5: a committed upload holds exactly the bytes written, under the name commit returned, \
         and nothing else is left: wrote \"hello \", \"\" and \"world\" and committed as {:?}; \
         the store holds {}",
        name.as_str(),
        described(&contents)
    );
}

/// C5: a request that fails leaves nothing behind: dropping a pending
/// upload removes every byte written.
pub async fn a_dropped_upload_leaves_nothing_behind_c5(fixture: &impl UploadStoreFixture) {
    let mut upload = fixture.store().begin().await.answer("begin an upload");
    upload
        .write(&[7; 10_000])
        .await
        .answer("write 10,000 bytes");

    drop(upload);

    let contents = fixture.contents().await;
    assert_eq!(
        contents,
        BTreeMap::new(),
        "C5: a dropped upload leaves nothing behind: wrote 10,000 bytes and dropped the upload \
         uncommitted; the store holds {}",
        described(&contents)
    );
}

/// C5: a request whose client vanishes has its future dropped at any
/// `await`: an upload abandoned while `begin` or `write` is still running
/// leaves nothing once the store's work has settled (a disk store that
/// creates its file on a thread after the caller left can leave an empty
/// temporary file per reset).
pub async fn an_upload_abandoned_mid_begin_or_mid_write_leaves_nothing_c5(
    fixture: &impl UploadStoreFixture,
) {
    let store = fixture.store();
    for _ in 0..20 {
        // Polled once, then dropped: whatever the store started is orphaned.
        let _ = futures_util::FutureExt::now_or_never(store.begin());
    }
    for _ in 0..20 {
        let mut upload = store.begin().await.answer("begin an upload");
        let _ = futures_util::FutureExt::now_or_never(upload.write(&[9; 100_000]));
    }

    // Work the store handed to other threads ends on its own time.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut contents = fixture.contents().await;
    while !contents.is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        contents = fixture.contents().await;
    }
    assert_eq!(
        contents,
        BTreeMap::new(),
        "C5: uploads abandoned mid-begin or mid-write leave nothing: dropped 20 begins and 20 \
         writes after one poll each and waited 5 s; the store holds {}",
        described(&contents)
    );
}

/// C4: every commit gets a name of its own, so one upload never replaces
/// another.
pub async fn each_commit_gets_a_new_name_and_keeps_the_others_c4(
    fixture: &impl UploadStoreFixture,
) {
    let mut names = Vec::new();
    for byte in 0..3u8 {
        let mut upload = fixture.store().begin().await.answer("begin an upload");
        upload
            .write(&[byte])
            .await
            .answer(format_args!("write the byte {byte}"));
        names.push(upload.commit().await.answer("commit the upload"));
    }

    let contents = fixture.contents().await;

    let expected: BTreeMap<String, Vec<u8>> = names
        .iter()
        .zip(0..3u8)
        .map(|(name, byte)| (name.as_str().to_owned(), vec![byte]))
        .collect();
    assert_eq!(
        contents,
        expected,
        "C4: every commit gets a name of its own and keeps the others: committed the bytes 0, 1 \
         and 2 as {:?}; expected {}, the store holds {}",
        names.iter().map(|name| name.as_str()).collect::<Vec<_>>(),
        described(&expected),
        described(&contents)
    );
}

/// `remove` undoes a commit, and removing a name that is not there is no
/// error (a partly committed request is undone file by file, C5).
pub async fn remove_deletes_a_committed_file_and_ignores_a_missing_one(
    fixture: &impl UploadStoreFixture,
) {
    let store = fixture.store();
    let name = store
        .begin()
        .await
        .answer("begin an upload")
        .commit()
        .await
        .answer("commit an empty upload");

    store
        .remove(&name)
        .await
        .answer(format_args!("remove the committed {:?}", name.as_str()));
    store.remove(&name).await.answer(format_args!(
        "C5: removing a name that is not there is no error: remove {:?} a second time",
        name.as_str()
    ));

    let contents = fixture.contents().await;
    assert_eq!(
        contents,
        BTreeMap::new(),
        "C5: remove deletes a committed file: committed {:?} and removed it twice; the store holds {}",
        name.as_str(),
        described(&contents)
    );
}

/// What a store holds, for a message: each name with its size and at most
/// its first 16 bytes.
fn described(contents: &BTreeMap<String, Vec<u8>>) -> String {
    if contents.is_empty() {
        return "nothing".to_owned();
    }
    let files: Vec<String> = contents
        .iter()
        .map(|(name, bytes)| {
            let shown = &bytes[..bytes.len().min(16)];
            format!("{name:?} ({} bytes: {shown:?})", bytes.len())
        })
        .collect();
    files.join(", ")
}
