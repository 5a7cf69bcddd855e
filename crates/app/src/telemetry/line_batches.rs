//! Where log lines go: every thread gathers its lines in a buffer of its
//! own, and one background thread writes them out in batches.
//!
//! A line costs a lock of its thread's buffer (contended only by the
//! writer's swap, once per batch) and a copy. A thread wakes the writer only
//! when its buffer goes from empty to non-empty; the writer then lets lines
//! gather for [`LINGER`] before it takes every buffer and writes them.
//!
//! Invariants:
//! - at most one wake-up of the writer per [`LINGER`] however many
//!   requests, and none while the service is idle;
//! - lines of one thread stay in order; lines of different threads are
//!   interleaved by batch, not by time (each line carries its timestamp);
//! - on a crash (`SIGKILL`, an abort) the lines of the last [`LINGER`]
//!   (10 ms), still in memory, are lost, as a channel's queue would be;
//! - when stdout is blocked, a thread whose buffer already holds
//!   [`MAX_BUFFERED`] bytes drops further lines rather than stall requests;
//! - on a normal exit [`LogWriterGuard`] writes everything still buffered.
//!
//! Why: against a line-buffered stdout, a non-blocking writer alone took
//! `GET /` from 8.9 to 8.3 µs of CPU (docs/performance.md "The HTTP edge
//! and the request log, measured"); `tracing-appender`'s, the one measured,
//! copied every line into a `Vec` of its own, sent it over a channel and
//! wrote whenever that channel ran empty, so under load nearly every
//! request woke its thread (a futex call and a context switch, on the
//! worker's core when the service is pinned to one).

use std::cell::RefCell;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::Duration;

use tracing_subscriber::fmt::MakeWriter;

/// How long lines gather before the writer takes them: the bound on what a
/// crash loses, and on how late a line reaches stdout.
const LINGER: Duration = Duration::from_millis(10);
/// The most a thread keeps buffered (4 MiB, tens of thousands of request
/// lines); lines beyond are dropped until the writer catches up.
const MAX_BUFFERED: usize = 4 << 20;
/// How long the guard waits, at exit, for the last lines to be written.
const LAST_WRITE_TIMEOUT: Duration = Duration::from_secs(1);

/// The writer the log layer writes each line to (a [`MakeWriter`]).
#[derive(Clone)]
pub struct LineBatches {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for LineBatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineBatches").finish_non_exhaustive()
    }
}

impl LineBatches {
    /// Lets `write` add whole lines (each ending in a newline) to the
    /// calling thread's buffer, in place: the request lines are written
    /// there directly, with no copy of their own.
    pub fn append_with(&self, write: impl FnOnce(&mut Vec<u8>)) {
        self.shared.append_with(write);
    }
}

/// Writes what is still buffered when dropped (at exit).
#[must_use = "dropping the guard stops the log's writer"]
pub struct LogWriterGuard {
    shared: Arc<Shared>,
    written: Receiver<()>,
}

impl std::fmt::Debug for LogWriterGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogWriterGuard").finish_non_exhaustive()
    }
}

impl Drop for LogWriterGuard {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::Release);
        self.shared.wake();
        // A stdout that never takes the lines must not hold up the exit.
        let _ = self.written.recv_timeout(LAST_WRITE_TIMEOUT);
    }
}

/// Starts the writer thread, writing to `out`.
pub fn start(out: impl Write + Send + 'static) -> io::Result<(LineBatches, LogWriterGuard)> {
    static NEXT_ID: AtomicUsize = AtomicUsize::new(0);
    // One pending wake-up is enough: the writer takes every buffer.
    let (wake, woken) = sync_channel(1);
    let (written_sender, written) = sync_channel(1);
    let shared = Arc::new(Shared {
        id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        buffers: Mutex::default(),
        homeless: Arc::default(),
        wake,
        stopping: AtomicBool::new(false),
    });
    lock(&shared.buffers).push(Arc::clone(&shared.homeless));
    let writer = Arc::clone(&shared);
    thread::Builder::new()
        .name("log-writer".into())
        .spawn(move || {
            writer.write_batches(&woken, out);
            let _ = written_sender.send(());
        })?;
    Ok((
        LineBatches {
            shared: Arc::clone(&shared),
        },
        LogWriterGuard { shared, written },
    ))
}

/// What the threads writing lines and the writer thread share.
struct Shared {
    /// Tells apart the writers of a process (tests start several), since a
    /// thread's buffer is found through a thread-local.
    id: usize,
    /// The buffer of every thread that wrote a line since its last batch
    /// was taken, or that is still alive.
    buffers: Mutex<Vec<Arc<Buffer>>>,
    /// For lines written while a thread's locals are being destroyed.
    homeless: Arc<Buffer>,
    wake: SyncSender<()>,
    stopping: AtomicBool,
}

/// One thread's lines, not yet taken by the writer.
#[derive(Default)]
struct Buffer {
    lines: Mutex<Vec<u8>>,
}

thread_local! {
    /// This thread's buffer, and the id of the writer it belongs to.
    static MINE: RefCell<Option<(usize, Arc<Buffer>)>> = const { RefCell::new(None) };
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A thread that panicked while holding a buffer left whole lines in it.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    fn wake(&self) {
        // Full: a wake-up is pending already.
        let _ = self.wake.try_send(());
    }

    /// Adds `bytes` to the calling thread's buffer.
    fn append(&self, bytes: &[u8]) {
        self.append_with(|lines| lines.extend_from_slice(bytes));
    }

    /// Lets `write` add to the calling thread's buffer.
    fn append_with(&self, write: impl FnOnce(&mut Vec<u8>)) {
        let mut write = Some(write);
        let appended = MINE.try_with(|mine| {
            let Ok(mut mine) = mine.try_borrow_mut() else {
                return false;
            };
            if !matches!(&*mine, Some((id, _)) if *id == self.id) {
                let buffer = Arc::<Buffer>::default();
                lock(&self.buffers).push(Arc::clone(&buffer));
                *mine = Some((self.id, buffer));
            }
            let (Some((_, buffer)), Some(write)) = (&*mine, write.take()) else {
                return false;
            };
            self.push(buffer, write);
            true
        });
        if appended != Ok(true)
            && let Some(write) = write
        {
            self.push(&self.homeless, write);
        }
    }

    fn push(&self, buffer: &Buffer, write: impl FnOnce(&mut Vec<u8>)) {
        let mut lines = lock(&buffer.lines);
        let before = lines.len();
        write(&mut lines);
        if lines.len() > MAX_BUFFERED {
            lines.truncate(before);
            return;
        }
        drop(lines);
        // Lines already waiting mean the writer is due anyway.
        if before == 0 {
            self.wake();
        }
    }

    /// The writer thread: waits for a line, lets lines gather, takes every
    /// buffer and writes them; until the guard is dropped.
    fn write_batches(&self, woken: &Receiver<()>, mut out: impl Write) {
        let mut batch = Vec::new();
        loop {
            // The sender lives in `self`: `recv` fails only if it is gone.
            let stopping = woken.recv().is_err() || self.stopping.load(Ordering::Acquire);
            if !stopping {
                thread::sleep(LINGER);
            }
            self.write_all_buffered(&mut batch, &mut out);
            if stopping || self.stopping.load(Ordering::Acquire) {
                self.write_all_buffered(&mut batch, &mut out);
                return;
            }
        }
    }

    fn write_all_buffered(&self, batch: &mut Vec<u8>, out: &mut impl Write) {
        // Not locked while writing: a thread's first line registers its
        // buffer, and must not wait for a slow stdout.
        let buffers = lock(&self.buffers).clone();
        for buffer in &buffers {
            // Swapped, not copied: the thread goes on with the batch's
            // (already grown) allocation.
            std::mem::swap(&mut *lock(&buffer.lines), batch);
            if !batch.is_empty() {
                // A failed write (stdout closed) loses the lines, as any
                // writer would; the service goes on.
                let _ = out.write_all(batch);
                batch.clear();
            }
        }
        drop(buffers);
        let _ = out.flush();
        // A thread that ended dropped its handle: once its buffer is
        // written, nobody needs it.
        lock(&self.buffers)
            .retain(|buffer| Arc::strong_count(buffer) > 1 || !lock(&buffer.lines).is_empty());
    }
}

/// The handle the log layer writes one line through.
pub struct LineWriter<'a>(&'a Shared);

impl std::fmt::Debug for LineWriter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineWriter").finish_non_exhaustive()
    }
}

impl Write for LineWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.append(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for LineBatches {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter(&self.shared)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    /// An output the test can read while the writer writes to it.
    #[derive(Clone, Default)]
    struct Shelf(Arc<Mutex<Vec<u8>>>);

    impl Write for Shelf {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            lock(&self.0).extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Shelf {
        fn text(&self) -> String {
            String::from_utf8(lock(&self.0).clone()).unwrap()
        }
    }

    #[test]
    fn every_line_of_every_thread_is_written_in_its_thread_s_order() {
        let shelf = Shelf::default();
        let (lines, guard) = start(shelf.clone()).unwrap();
        let threads: Vec<_> = (0..4)
            .map(|thread| {
                let lines = lines.clone();
                thread::spawn(move || {
                    for line in 0..1000 {
                        let text = format!("{thread} {line}\n");
                        lines.make_writer().write_all(text.as_bytes()).unwrap();
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        drop(guard);

        let text = shelf.text();
        for thread in 0..4 {
            let of_thread: Vec<u32> = text
                .lines()
                .filter_map(|line| line.strip_prefix(&format!("{thread} ")))
                .map(|line| line.parse().unwrap())
                .collect();
            assert_eq!(of_thread, (0..1000).collect::<Vec<_>>(), "thread {thread}");
        }
        assert_eq!(text.lines().count(), 4000);
    }

    #[test]
    fn a_line_is_written_within_the_linger_without_an_exit() {
        let shelf = Shelf::default();
        let (lines, _guard) = start(shelf.clone()).unwrap();
        lines.make_writer().write_all(b"first\n").unwrap();
        let started = Instant::now();
        while shelf.text() != "first\n" {
            assert!(started.elapsed() < Duration::from_secs(5), "never written");
            thread::sleep(Duration::from_millis(1));
        }
        lines.make_writer().write_all(b"second\n").unwrap();
        while shelf.text() != "first\nsecond\n" {
            assert!(started.elapsed() < Duration::from_secs(5), "never written");
            thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn the_buffer_of_an_ended_thread_is_forgotten_once_written() {
        let shelf = Shelf::default();
        let (lines, guard) = start(shelf.clone()).unwrap();
        let writer = lines.clone();
        thread::spawn(move || writer.make_writer().write_all(b"gone\n").unwrap())
            .join()
            .unwrap();
        let started = Instant::now();
        while shelf.text() != "gone\n" {
            assert!(started.elapsed() < Duration::from_secs(5), "never written");
            thread::sleep(Duration::from_millis(1));
        }
        lines.shared.wake();
        while lock(&lines.shared.buffers).len() > 1 {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "never forgotten"
            );
            thread::sleep(Duration::from_millis(1));
        }
        drop(guard);
    }

    #[test]
    fn a_full_buffer_drops_lines_rather_than_grow() {
        let (lines, _guard) = start(io::sink()).unwrap();
        let shared = &lines.shared;
        let buffer = Buffer::default();
        let line = vec![b'x'; 1024];
        for _ in 0..(MAX_BUFFERED / line.len() + 10) {
            shared.push(&buffer, |lines| lines.extend_from_slice(&line));
        }
        assert_eq!(lock(&buffer.lines).len(), MAX_BUFFERED);
    }
}
