//! A spool between a producer that must not wait and a client that may:
//! the bytes of a streamed response (the full listing) are written at the
//! producer's pace and read at the client's (C12: a client never holds
//! the store).
//!
//! Invariants:
//! - the reader yields exactly the chunks pushed, in order, then the end
//!   the writer gave (an error ends the body unterminated);
//! - [`SpoolWriter::push`] never waits for the reader: a chunk goes to
//!   memory while the spool holds at most [`SpoolSettings::memory_bytes`]
//!   there (or while the reader has nothing queued: one chunk always
//!   fits), otherwise to a temporary file; memory stays bounded however
//!   far the client falls behind;
//! - the file is created only when a chunk first spills, in
//!   [`SpoolSettings::directory`], without a name (`O_TMPFILE` where the
//!   filesystem has it, else unlinked at once): nothing is ever left
//!   behind, not even by a killed process, and its space is freed when
//!   both ends are dropped; once the reader has caught up with it, the
//!   next spill starts again at its beginning, so it grows with how far
//!   the reader lags, not with the body;
//! - dropping the reader (the client went away, or was cut for reading
//!   nothing, `SEND_TIMEOUT_MS`) makes the next push fail
//!   ([`Refused::ReaderGone`]), so the producer stops and lets go of what
//!   it reads from.
//!
//! Why a file and not back-pressure: back-pressure is what let a client
//! that stopped reading hold a store connection, a SQLite reader and a
//! snapshot for ever. Why not all in memory: a listing of a large
//! collection is tens of megabytes, per client (C10).

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt as _;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use actix_web::web::Bytes;
use futures_util::Stream;
use parking_lot::Mutex;
use tokio::task::JoinHandle;

/// Where a spool spills and what it may hold in memory.
#[derive(Debug, Clone)]
pub struct SpoolSettings {
    /// Where spilled bytes go, in files without a name. The OS's temporary
    /// directory by default (`TMPDIR`): put it on a disk, not on a
    /// RAM-backed `tmpfs`, for the spill to spare memory.
    pub directory: PathBuf,
    /// The most one spool holds in memory before it spills.
    pub memory_bytes: usize,
}

/// 1 MiB a response: a few batches of a listing (about 40 KiB each as
/// JSON, a tenth of that compressed), so a reader that keeps up never
/// touches the file.
const MEMORY_BYTES: usize = 1024 * 1024;

/// The most the reader reads from the file at once.
const READ_BLOCK: u64 = 256 * 1024;

impl Default for SpoolSettings {
    fn default() -> Self {
        Self {
            directory: std::env::temp_dir(),
            memory_bytes: MEMORY_BYTES,
        }
    }
}

/// A spool's two ends.
pub(crate) fn spool(settings: &SpoolSettings) -> (SpoolWriter, SpoolReader) {
    let shared = Arc::new(Mutex::new(State {
        queued: VecDeque::new(),
        in_memory: 0,
        file: None,
        reading_file: false,
        end: End::Open,
        waker: None,
        reader_gone: false,
    }));
    let writer = SpoolWriter {
        shared: Arc::clone(&shared),
        directory: settings.directory.clone(),
        memory_bytes: settings.memory_bytes,
        file: None,
        ended: false,
    };
    let reader = SpoolReader {
        shared,
        reading: None,
    };
    (writer, reader)
}

/// What both ends share.
struct State {
    /// What the reader has yet to read, in order.
    queued: VecDeque<Queued>,
    /// The bytes of the [`Queued::Memory`] chunks.
    in_memory: usize,
    /// The spill file, once there is one.
    file: Option<Arc<File>>,
    /// A read of the file is under way: the writer may not start the file
    /// again from its beginning meanwhile.
    reading_file: bool,
    end: End,
    /// The reader, waiting for more.
    waker: Option<Waker>,
    reader_gone: bool,
}

enum Queued {
    Memory(Bytes),
    /// `len` bytes of the file from `offset`.
    File {
        offset: u64,
        len: u64,
    },
}

enum End {
    Open,
    Finished,
    /// Taken by the reader when it yields it.
    Failed(Option<io::Error>),
}

impl State {
    fn wake(&mut self) {
        if let Some(waker) = self.waker.take() {
            waker.wake();
        }
    }

    /// Whether the file holds nothing the reader still needs.
    fn file_drained(&self) -> bool {
        !self.reading_file
            && !self
                .queued
                .iter()
                .any(|queued| matches!(queued, Queued::File { .. }))
    }
}

/// Why a push was refused: the producer should stop.
#[derive(Debug)]
pub(crate) enum Refused {
    /// Nobody will read what follows.
    ReaderGone,
    /// The spill file could not be created or written.
    File(io::Error),
}

/// The producer's end.
pub(crate) struct SpoolWriter {
    shared: Arc<Mutex<State>>,
    directory: PathBuf,
    memory_bytes: usize,
    /// The spill file and how far it is written.
    file: Option<(Arc<File>, u64)>,
    ended: bool,
}

impl std::fmt::Debug for SpoolWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpoolWriter").finish_non_exhaustive()
    }
}

impl SpoolWriter {
    /// Queues `chunk` for the reader, in memory or in the file; never
    /// waits for the reader.
    ///
    /// # Errors
    /// [`Refused::ReaderGone`] once the reader is dropped;
    /// [`Refused::File`] when the chunk had to spill and the file failed.
    pub(crate) async fn push(&mut self, chunk: Bytes) -> Result<(), Refused> {
        if chunk.is_empty() {
            return Ok(());
        }
        let len = chunk.len() as u64;
        let restart = {
            let mut state = self.shared.lock();
            if state.reader_gone {
                return Err(Refused::ReaderGone);
            }
            if state.queued.is_empty() || state.in_memory + chunk.len() <= self.memory_bytes {
                state.in_memory += chunk.len();
                state.queued.push_back(Queued::Memory(chunk));
                state.wake();
                return Ok(());
            }
            state.file_drained()
        };
        let (file, written) = match self.file.take() {
            Some((file, written)) => (file, if restart { 0 } else { written }),
            None => {
                let file = Arc::new(self.create_file().await?);
                self.shared.lock().file = Some(Arc::clone(&file));
                (file, 0)
            }
        };
        let writing = Arc::clone(&file);
        tokio::task::spawn_blocking(move || writing.write_all_at(&chunk, written))
            .await
            .map_err(|stopped| Refused::File(io::Error::other(stopped)))?
            .map_err(Refused::File)?;
        self.file = Some((file, written + len));
        let mut state = self.shared.lock();
        if state.reader_gone {
            return Err(Refused::ReaderGone);
        }
        match state.queued.back_mut() {
            Some(Queued::File {
                offset,
                len: queued,
            }) if *offset + *queued == written => {
                *queued += len;
            }
            _ => state.queued.push_back(Queued::File {
                offset: written,
                len,
            }),
        }
        state.wake();
        Ok(())
    }

    /// A file without a name in the spool's directory, on a blocking
    /// thread (creating a file may wait for the disk).
    async fn create_file(&self) -> Result<File, Refused> {
        let directory = self.directory.clone();
        tokio::task::spawn_blocking(move || tempfile::tempfile_in(directory))
            .await
            .map_err(|stopped| Refused::File(io::Error::other(stopped)))?
            .map_err(Refused::File)
    }

    /// Whether the reader is gone (the producer may stop early).
    pub(crate) fn reader_gone(&self) -> bool {
        self.shared.lock().reader_gone
    }

    /// Ends the body after what was pushed.
    pub(crate) fn finish(mut self) {
        self.end(End::Finished);
    }

    /// Ends the body with `error` after what was pushed: the reader yields
    /// it, and the response is cut unterminated.
    pub(crate) fn fail(mut self, error: io::Error) {
        self.end(End::Failed(Some(error)));
    }

    fn end(&mut self, end: End) {
        self.ended = true;
        let mut state = self.shared.lock();
        state.end = end;
        state.wake();
    }
}

/// A producer dropped before it ended the body (its task was cancelled,
/// or it panicked) cuts the body: it never looks complete.
impl Drop for SpoolWriter {
    fn drop(&mut self) {
        if !self.ended {
            self.end(End::Failed(Some(io::Error::other(
                "the response's producer stopped before the end",
            ))));
        }
    }
}

/// The client's end: the response body.
pub(crate) struct SpoolReader {
    shared: Arc<Mutex<State>>,
    /// A read of the file under way.
    reading: Option<JoinHandle<io::Result<Bytes>>>,
}

impl std::fmt::Debug for SpoolReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpoolReader").finish_non_exhaustive()
    }
}

impl Stream for SpoolReader {
    type Item = io::Result<Bytes>;

    fn poll_next(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(reading) = &mut this.reading {
                let read = match Pin::new(reading).poll(context) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(read) => read,
                };
                this.reading = None;
                this.shared.lock().reading_file = false;
                return Poll::Ready(Some(
                    read.unwrap_or_else(|stopped| Err(io::Error::other(stopped))),
                ));
            }
            let mut state = this.shared.lock();
            if matches!(state.queued.front(), Some(Queued::Memory(_)))
                && let Some(Queued::Memory(chunk)) = state.queued.pop_front()
            {
                state.in_memory -= chunk.len();
                return Poll::Ready(Some(Ok(chunk)));
            }
            let (offset, len) = match state.queued.front_mut() {
                Some(Queued::File { offset, len }) => {
                    let block = (*len).min(READ_BLOCK);
                    let at = *offset;
                    *offset += block;
                    *len -= block;
                    if *len == 0 {
                        state.queued.pop_front();
                    }
                    (at, block)
                }
                _ => {
                    return match &mut state.end {
                        End::Open => {
                            state.waker = Some(context.waker().clone());
                            Poll::Pending
                        }
                        End::Finished => Poll::Ready(None),
                        End::Failed(error) => Poll::Ready(error.take().map(Err)),
                    };
                }
            };
            let Some(file) = state.file.clone() else {
                return Poll::Ready(Some(Err(io::Error::other("the spool lost its file"))));
            };
            state.reading_file = true;
            drop(state);
            this.reading = Some(tokio::task::spawn_blocking(move || {
                let mut block = vec![0; usize::try_from(len).map_err(io::Error::other)?];
                file.read_exact_at(&mut block, offset)?;
                Ok(Bytes::from(block))
            }));
        }
    }
}

/// The producer learns at its next push that nobody reads any more.
impl Drop for SpoolReader {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.reader_gone = true;
        state.queued.clear();
        state.in_memory = 0;
    }
}

#[cfg(test)]
mod tests;
