//! Every C5 rule of an upload session, against a [`MockUploadStore`] whose
//! files are recorded in a [`Ledger`]: what was begun, written, kept,
//! discarded and removed.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use mockall::predicate::eq;

use super::*;
use crate::uploads::{MockUploadStore, StoredName, UploadService};

/// What became of a file the store began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Receiving,
    Kept,
    /// Dropped uncommitted: the port deletes its bytes.
    Discarded,
    /// Kept, then removed again.
    Removed,
}

/// Every file the store began, in order, with its fate and bytes.
#[derive(Debug, Default)]
struct Ledger(Vec<(Fate, Vec<u8>)>);

type Shared = Arc<Mutex<Ledger>>;

impl Ledger {
    fn fates(&self) -> Vec<Fate> {
        self.0.iter().map(|(fate, _)| *fate).collect()
    }

    /// True when the store holds nothing of the request (C5).
    fn nothing_kept(&self) -> bool {
        self.0
            .iter()
            .all(|(fate, _)| matches!(fate, Fate::Discarded | Fate::Removed))
    }
}

/// The name the store gives the `index`th file it began.
fn name_of(index: usize) -> StoredName {
    StoredName::new(format!("{:032x}", index + 1)).unwrap()
}

/// Which store operation fails, for the store-failure tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    Begin,
    Write,
    /// The commit of the file begun at this index.
    Commit(usize),
}

struct Pending {
    index: usize,
    ledger: Shared,
    fault: Fault,
    committed: bool,
}

fn disk_full() -> UploadStoreError {
    UploadStoreError("disk full".into())
}

#[async_trait]
impl PendingUpload for Pending {
    async fn write(&mut self, chunk: &[u8]) -> Result<(), UploadStoreError> {
        if self.fault == Fault::Write {
            return Err(disk_full());
        }
        self.ledger.lock().unwrap().0[self.index]
            .1
            .extend_from_slice(chunk);
        Ok(())
    }

    async fn commit(mut self: Box<Self>) -> Result<StoredName, UploadStoreError> {
        if self.fault == Fault::Commit(self.index) {
            return Err(disk_full());
        }
        self.ledger.lock().unwrap().0[self.index].0 = Fate::Kept;
        self.committed = true;
        Ok(name_of(self.index))
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.committed {
            self.ledger.lock().unwrap().0[self.index].0 = Fate::Discarded;
        }
    }
}

/// The `begin` of a store that records into `ledger` and fails as `fault` says.
fn begin_recording(
    ledger: &Shared,
    fault: Fault,
) -> impl FnMut() -> Result<Box<dyn PendingUpload>, UploadStoreError> + Send + 'static {
    let begun = Arc::clone(ledger);
    move || {
        if fault == Fault::Begin {
            return Err(disk_full());
        }
        let mut files = begun.lock().unwrap();
        files.0.push((Fate::Receiving, Vec::new()));
        Ok(Box::new(Pending {
            index: files.0.len() - 1,
            ledger: Arc::clone(&begun),
            fault,
            committed: false,
        }))
    }
}

/// A mock store that records into `ledger` and fails as `fault` says.
fn store(ledger: &Shared, fault: Fault) -> MockUploadStore {
    let mut store = MockUploadStore::new();
    store
        .expect_begin()
        .returning(begin_recording(ledger, fault));
    let removed = Arc::clone(ledger);
    store.expect_remove().returning(move |name| {
        let mut files = removed.lock().unwrap();
        for (index, (fate, _)) in files.0.iter_mut().enumerate() {
            if name_of(index) == *name {
                *fate = Fate::Removed;
            }
        }
        Ok(())
    });
    store
}

fn session_over(store: MockUploadStore, policy: UploadPolicy) -> UploadSession {
    UploadService::new(Arc::new(store)).session(policy)
}

/// A session over a healthy recording store, and its ledger.
fn session(policy: UploadPolicy) -> (UploadSession, Shared) {
    let ledger = Shared::default();
    (session_over(store(&ledger, Fault::None), policy), ledger)
}

const MAX_FILE_BYTES: u64 = 1000;
const AVATAR: UploadPolicy = UploadPolicy::avatar(MAX_FILE_BYTES);
const PHOTOS: UploadPolicy = UploadPolicy::photos(MAX_FILE_BYTES);

async fn add_file(
    session: &mut UploadSession,
    field: &str,
    bytes: &[u8],
) -> Result<(), UploadError> {
    session
        .file(field, format!("{field}.png"), "image/png".into())
        .await?
        .write(bytes)
        .await
}

fn add_text(session: &mut UploadSession, name: &str, bytes: &[u8]) -> Result<(), UploadError> {
    session.text(name.to_owned())?.write(bytes)
}

/// Asserts that `result` is the refusal `pattern`.
macro_rules! assert_refused {
    ($result:expr, $pattern:pat $(if $guard:expr)?) => {
        let result = $result;
        assert!(matches!(result, Err($pattern) $(if $guard)?), "{result:?}");
    };
}

/// Ends a refused request as the HTTP adapter does, by dropping its
/// session, and checks that the store holds nothing of it (C5).
fn abandon(session: UploadSession, ledger: &Shared) {
    drop(session);
    let ledger = ledger.lock().unwrap();
    assert!(ledger.nothing_kept(), "{ledger:?}");
}

#[tokio::test]
async fn an_avatar_is_kept_with_its_bytes_and_the_text_fields_in_order_c5() {
    let (mut session, ledger) = session(AVATAR);

    add_text(&mut session, "nickname", b"ada").unwrap();
    let mut avatar = session
        .file("avatar", "me.png".into(), "image/png".into())
        .await
        .unwrap();
    avatar.write(b"hello ").await.unwrap();
    avatar.write(b"world").await.unwrap();
    // A text part named like the file field is only text.
    add_text(&mut session, "avatar", b"caption").unwrap();
    let upload = session.finish().await.unwrap();

    assert_eq!(
        upload.files.first,
        StoredFile {
            field: "avatar",
            original_name: "me.png".into(),
            media_type: "image/png".into(),
            name: name_of(0),
            size: 11,
        }
    );
    assert!(upload.files.more.is_empty());
    let fields: Vec<_> = upload
        .fields
        .iter()
        .map(|field| (field.name.as_str(), field.value.as_str()))
        .collect();
    assert_eq!(fields, [("nickname", "ada"), ("avatar", "caption")]);
    assert_eq!(
        ledger.lock().unwrap().0,
        [(Fate::Kept, b"hello world".to_vec())]
    );
}

#[tokio::test]
async fn twelve_photos_are_kept_in_the_order_they_were_sent_c5() {
    let (mut session, ledger) = session(PHOTOS);

    for n in 0..12u8 {
        add_file(&mut session, "photos", &[n; 10]).await.unwrap();
    }
    let upload = session.finish().await.unwrap();

    let names: Vec<_> = upload.files.iter().map(|file| file.name.clone()).collect();
    assert_eq!(names, (0..12).map(name_of).collect::<Vec<_>>());
    assert_eq!(upload.files.total_bytes(), 120);
    assert_eq!(ledger.lock().unwrap().fates(), [Fate::Kept; 12]);
}

#[tokio::test]
async fn a_file_in_another_field_is_refused_before_the_store_begins_it_c5() {
    let mut store = MockUploadStore::new();
    store.expect_begin().never();
    let mut session = session_over(store, AVATAR);

    let refused = add_file(&mut session, "photo", b"x").await;

    assert_refused!(
        &refused,
        UploadError::UnexpectedFileField { field, expected: "avatar" } if field == "photo"
    );
}

#[tokio::test]
async fn a_second_avatar_is_refused_before_the_store_begins_it_and_the_first_goes_c5() {
    let (mut session, ledger) = session(AVATAR);
    add_file(&mut session, "avatar", b"first").await.unwrap();

    let refused = add_file(&mut session, "avatar", b"second").await;

    assert_refused!(
        refused,
        UploadError::TooManyFiles {
            field: "avatar",
            max: 1
        }
    );
    assert_eq!(
        ledger.lock().unwrap().0.len(),
        1,
        "the second was never begun"
    );
    abandon(session, &ledger);
}

#[tokio::test]
async fn a_thirteenth_photo_is_refused_and_the_twelve_before_it_go_c5() {
    let (mut session, ledger) = session(PHOTOS);
    for _ in 0..12 {
        add_file(&mut session, "photos", b"p").await.unwrap();
    }

    let refused = add_file(&mut session, "photos", b"p").await;

    assert_refused!(refused, UploadError::TooManyFiles { max: 12, .. });
    assert_eq!(
        ledger.lock().unwrap().0.len(),
        12,
        "the 13th was never begun"
    );
    abandon(session, &ledger);
}

#[tokio::test]
async fn a_request_without_a_file_is_refused_c5() {
    for policy in [AVATAR, PHOTOS] {
        let (mut session, _) = session(policy);
        add_text(&mut session, "nickname", b"ada").unwrap();

        let refused = session.finish().await;

        assert_refused!(
            refused,
            UploadError::MissingFile { field } if field == policy.file_field()
        );
    }
}

#[tokio::test]
async fn a_file_may_reach_max_file_bytes_and_the_chunk_past_it_is_never_written_c5() {
    let (mut session, ledger) = session(PHOTOS);
    add_file(&mut session, "photos", &[1; 1000]).await.unwrap();
    let mut second = session
        .file("photos", "big.png".into(), "image/png".into())
        .await
        .unwrap();
    second.write(&[2; 999]).await.unwrap();

    let refused = second.write(&[2; 2]).await;

    assert_refused!(refused, UploadError::FileTooLarge { max_bytes: 1000 });
    assert_eq!(ledger.lock().unwrap().0[1].1.len(), 999);
    abandon(session, &ledger);
}

#[tokio::test]
async fn a_text_value_may_hold_64_kib_but_not_one_byte_more_c5() {
    let (mut session, ledger) = session(PHOTOS);
    add_file(&mut session, "photos", b"p").await.unwrap();
    add_text(&mut session, "full", &[b'v'; 64 * 1024]).unwrap();
    let mut note = session.text("note".into()).unwrap();
    note.write(&[b'n'; 64 * 1024]).unwrap();

    let refused = note.write(b"n");

    assert_refused!(
        refused,
        UploadError::TextValueTooLarge { max_bytes: 65_536 }
    );
    abandon(session, &ledger);
}

/// A session holding an avatar, then `count` text values of `value_bytes`
/// bytes each, all under one name.
async fn avatar_then_texts(count: usize, value_bytes: usize) -> (UploadSession, Shared) {
    let (mut session, ledger) = session(AVATAR);
    add_file(&mut session, "avatar", b"a").await.unwrap();
    let value = vec![b'v'; value_bytes];
    for _ in 0..count {
        add_text(&mut session, "tag", &value).unwrap();
    }
    (session, ledger)
}

#[tokio::test]
async fn text_values_may_hold_1_mib_together_however_their_names_repeat_c5() {
    let (session, _) = avatar_then_texts(16, 64 * 1024).await;

    let upload = session.finish().await.unwrap();

    assert_eq!(upload.fields.len(), 16);
    assert!(
        upload
            .fields
            .iter()
            .all(|field| field.value.len() == 64 * 1024)
    );
}

#[tokio::test]
async fn one_byte_of_text_past_1_mib_is_refused_and_the_files_go_c5() {
    let (mut session, ledger) = avatar_then_texts(16, 64 * 1024).await;

    let refused = add_text(&mut session, "tag", b"v");

    assert_refused!(
        refused,
        UploadError::TextTooLarge {
            max_bytes: 1_048_576
        }
    );
    abandon(session, &ledger);
}

#[tokio::test]
async fn a_request_of_1000_parts_is_kept_c5() {
    // The avatar and 999 empty text parts.
    let (session, ledger) = avatar_then_texts(999, 0).await;

    let upload = session.finish().await.unwrap();

    assert_eq!(upload.fields.len(), 999);
    assert_eq!(ledger.lock().unwrap().fates(), [Fate::Kept]);
}

#[tokio::test]
async fn the_1001st_part_is_refused_whatever_it_is_and_the_files_go_c5() {
    // 1000 parts: the avatar and 999 empty text parts.
    let (mut session, ledger) = avatar_then_texts(999, 0).await;
    let text = add_text(&mut session, "t", b"");
    // A file part is counted before its field is checked: the bound holds
    // even for parts the policy would refuse anyway.
    let file = add_file(&mut session, "elsewhere", b"x").await;

    for refused in [text, file] {
        assert_refused!(refused, UploadError::TooManyParts { max: 1000 });
    }
    abandon(session, &ledger);
}

#[tokio::test]
async fn when_a_later_file_cannot_be_kept_the_files_kept_before_it_are_removed_c5() {
    let ledger = Shared::default();
    let mut store = MockUploadStore::new();
    store
        .expect_begin()
        .times(3)
        .returning(begin_recording(&ledger, Fault::Commit(1)));
    let removed = Arc::clone(&ledger);
    store
        .expect_remove()
        .with(eq(name_of(0)))
        .times(1)
        .returning(move |_| {
            removed.lock().unwrap().0[0].0 = Fate::Removed;
            Ok(())
        });
    let mut session = session_over(store, PHOTOS);
    for _ in 0..3 {
        add_file(&mut session, "photos", b"p").await.unwrap();
    }

    let failed = session.finish().await;

    assert_refused!(failed, UploadError::Store(_));
    assert_eq!(
        ledger.lock().unwrap().fates(),
        [Fate::Removed, Fate::Discarded, Fate::Discarded]
    );
}

#[tokio::test]
async fn a_file_the_store_cannot_begin_or_write_fails_the_request_and_nothing_is_kept_c5() {
    for fault in [Fault::Begin, Fault::Write] {
        let ledger = Shared::default();
        let mut session = session_over(store(&ledger, fault), AVATAR);

        let failed = add_file(&mut session, "avatar", b"bytes").await;

        assert_refused!(failed, UploadError::Store(_));
        abandon(session, &ledger);
    }
}

#[tokio::test]
async fn text_is_decoded_once_complete_and_bytes_that_are_not_utf8_are_replaced_c5() {
    let (mut session, _) = session(AVATAR);
    add_file(&mut session, "avatar", b"a").await.unwrap();
    let mut split = session.text("split".into()).unwrap();
    // "é" is two bytes; a chunk may end between them.
    split.write(&[0xc3]).unwrap();
    split.write(&[0xa9]).unwrap();
    add_text(&mut session, "bad", &[b'o', b'k', 0xff, 0xfe]).unwrap();

    let upload = session.finish().await.unwrap();

    assert_eq!(upload.fields[0].value, "é");
    assert_eq!(upload.fields[1].value, "ok\u{fffd}\u{fffd}");
}

#[test]
fn each_refusal_names_its_rule_and_bound_for_the_client_c5_c6() {
    for (error, message) in [
        (
            UploadError::UnexpectedFileField {
                field: "photo".into(),
                expected: "avatar",
            },
            "A file was sent in field `photo`; this route takes files only in `avatar`.",
        ),
        (
            UploadError::TooManyFiles {
                field: "photos",
                max: 12,
            },
            "At most 12 file(s) may be sent in `photos`.",
        ),
        (
            UploadError::MissingFile { field: "avatar" },
            "A file is required in field `avatar`.",
        ),
        (
            UploadError::FileTooLarge { max_bytes: 1000 },
            "A file must not exceed 1000 bytes.",
        ),
        (
            UploadError::TextValueTooLarge { max_bytes: 65_536 },
            "A text field must not exceed 65536 bytes.",
        ),
        (
            UploadError::TextTooLarge {
                max_bytes: 1_048_576,
            },
            "The text fields of a form must not exceed 1048576 bytes together.",
        ),
        (
            UploadError::TooManyParts { max: 1000 },
            "A form must not have more than 1000 parts.",
        ),
    ] {
        assert_eq!(error.to_string(), message);
    }
}
