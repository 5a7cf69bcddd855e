//! The spool's two ends against each other and against a directory:
//! order, bounded memory, the file's reuse and removal, and each way a
//! body ends.

use futures_util::StreamExt;

use super::*;

fn settings(directory: &std::path::Path, memory_bytes: usize) -> SpoolSettings {
    SpoolSettings {
        directory: directory.to_owned(),
        memory_bytes,
    }
}

/// The files of this process open in `directory` (they have no name,
/// but `/proc` shows where they were made).
fn open_files_in(directory: &std::path::Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter(|target| target.starts_with(directory))
        .count()
}

fn chunk(n: u8, len: usize) -> Bytes {
    Bytes::from(vec![n; len])
}

#[tokio::test]
async fn a_reader_that_keeps_up_gets_every_chunk_in_order_and_no_file_is_made() {
    let directory = tempfile::tempdir().unwrap();
    let (mut writer, mut reader) = spool(&settings(directory.path(), 1024));
    for n in 0..10 {
        writer.push(chunk(n, 100)).await.unwrap();
        assert_eq!(reader.next().await.unwrap().unwrap(), chunk(n, 100));
    }
    writer.finish();
    assert!(reader.next().await.is_none());
    assert_eq!(open_files_in(directory.path()), 0);
}

#[tokio::test]
async fn a_reader_that_falls_behind_gets_the_same_bytes_from_memory_and_file() {
    let directory = tempfile::tempdir().unwrap();
    let (mut writer, mut reader) = spool(&settings(directory.path(), 1000));
    // 10 chunks of 300 bytes: 3 fit in memory, the rest spill.
    for n in 0..10 {
        writer.push(chunk(n, 300)).await.unwrap();
    }
    assert_eq!(open_files_in(directory.path()), 1, "it spilled");
    assert!(
        writer.shared.lock().in_memory <= 1000,
        "memory stays bounded"
    );
    // Reading one frees room: the next chunk goes to memory, behind
    // the file's, and still comes out in order.
    let mut read = reader.next().await.unwrap().unwrap().to_vec();
    writer.push(chunk(10, 300)).await.unwrap();
    writer.finish();
    while let Some(more) = reader.next().await {
        read.extend_from_slice(&more.unwrap());
    }
    let expected: Vec<u8> = (0..11).flat_map(|n| vec![n; 300]).collect();
    assert_eq!(read, expected);
    drop(reader);
    assert_eq!(open_files_in(directory.path()), 0, "the file is gone");
}

#[tokio::test]
async fn once_the_reader_catches_up_the_file_is_written_from_its_start_again() {
    let directory = tempfile::tempdir().unwrap();
    let (mut writer, mut reader) = spool(&settings(directory.path(), 100));
    let mut read = Vec::new();
    for round in 0..3u8 {
        for n in 0..4 {
            writer.push(chunk(round * 4 + n, 100)).await.unwrap();
        }
        // The file's bytes come out in one read: read by length.
        while read.len() < usize::from(round + 1) * 400 {
            read.extend_from_slice(&reader.next().await.unwrap().unwrap());
        }
        let written = writer.file.as_ref().map(|(_, written)| *written);
        assert_eq!(written, Some(300), "round {round}: 3 chunks spilled from 0");
    }
    writer.finish();
    assert!(reader.next().await.is_none());
    let expected: Vec<u8> = (0..12).flat_map(|n| vec![n; 100]).collect();
    assert_eq!(read, expected);
}

#[tokio::test]
async fn a_dropped_reader_refuses_the_next_push_and_leaves_no_file() {
    let directory = tempfile::tempdir().unwrap();
    let (mut writer, reader) = spool(&settings(directory.path(), 10));
    writer.push(chunk(1, 100)).await.unwrap();
    writer.push(chunk(2, 100)).await.unwrap();
    assert_eq!(open_files_in(directory.path()), 1);
    drop(reader);
    assert!(writer.reader_gone());
    assert!(matches!(
        writer.push(chunk(3, 100)).await,
        Err(Refused::ReaderGone)
    ));
    drop(writer);
    assert_eq!(open_files_in(directory.path()), 0);
}

#[tokio::test]
async fn a_failed_or_abandoned_producer_ends_the_body_with_an_error() {
    let directory = tempfile::tempdir().unwrap();
    let (mut writer, mut reader) = spool(&settings(directory.path(), 1024));
    writer.push(chunk(1, 10)).await.unwrap();
    writer.fail(io::Error::other("the store failed"));
    assert!(reader.next().await.unwrap().is_ok());
    assert!(reader.next().await.unwrap().is_err());
    assert!(reader.next().await.is_none());

    let (writer, mut reader) = spool(&settings(directory.path(), 1024));
    drop(writer);
    assert!(reader.next().await.unwrap().is_err(), "never a clean end");
}

#[tokio::test]
async fn a_directory_that_cannot_hold_the_file_fails_the_push_that_spills() {
    let directory = tempfile::tempdir().unwrap();
    let missing = directory.path().join("missing");
    let (mut writer, _reader) = spool(&settings(&missing, 10));
    writer.push(chunk(1, 100)).await.unwrap();
    assert!(matches!(
        writer.push(chunk(2, 100)).await,
        Err(Refused::File(_))
    ));
}
