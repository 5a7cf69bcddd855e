//! The fast path writes exactly what the default text format writes.

use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;

use super::*;

thread_local! {
    /// Lines written by the fast path on this thread.
    pub(super) static FAST_LINES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// A writer that keeps every line, shared with the test.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Self;

    fn make_writer(&'a self) -> Self {
        self.clone()
    }
}

impl Captured {
    /// The lines written, without their timestamps (27 characters and a
    /// space), which differ by the time each format read the clock.
    fn lines(&self) -> Vec<String> {
        String::from_utf8(self.0.lock().unwrap().clone())
            .unwrap()
            .lines()
            .map(|line| line[28..].to_owned())
            .collect()
    }
}

/// The events a log may see: request lines as the HTTP adapter writes
/// them, with paths that need escaping, and other shapes of event.
fn emit_events() {
    for path in [
        "/",
        "/items/7",
        "/a\"b",
        "/a\\b",
        "/é",
        "/\u{1b}[31m",
        "/\t",
    ] {
        tracing::info!(
            target: REQUEST_TARGET,
            method = %"GET",
            path,
            status = 200_u16,
            latency_us = 17_u64,
        );
    }
    tracing::warn!(target: REQUEST_TARGET, r#type = "x", delta = -3_i64, ok = true, ratio = 0.5);
    tracing::info!(target: REQUEST_TARGET, "a message \u{1b}[31m with {}", 1);
    let error = std::io::Error::other("disk full");
    tracing::error!(target: REQUEST_TARGET, error = &error as &(dyn std::error::Error + 'static));
    tracing::info!(target: "items_service", store = "memory", "listening");
    let span = tracing::info_span!("work", id = 3);
    let _entered = span.enter();
    tracing::info!(target: REQUEST_TARGET, method = %"PUT", path = "/items/1");
}

fn lines_of(
    format: impl FormatEvent<
        tracing_subscriber::Registry,
        tracing_subscriber::fmt::format::DefaultFields,
    > + Send
    + Sync
    + 'static,
) -> Vec<String> {
    let captured = Captured::default();
    let layer = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .with_writer(captured.clone())
        .event_format(format);
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), emit_events);
    captured.lines()
}

#[test]
fn request_lines_are_byte_for_byte_the_default_text_format() {
    let fast = lines_of(TextLines::default());
    assert_eq!(
        FAST_LINES.get(),
        8,
        "the seven request lines and the warning take the fast path; the message, the error, the other target and the span do not"
    );
    let default = lines_of(Format::default());
    assert_eq!(fast.len(), 12);
    assert_eq!(fast, default);
    assert_eq!(
        fast[0],
        " INFO items_service::request: method=GET path=\"/\" status=200 latency_us=17"
    );
}

fn timestamp(seconds: u64, micros: u32) -> String {
    let mut text = String::new();
    let at = UNIX_EPOCH + Duration::from_secs(seconds) + Duration::from_micros(u64::from(micros));
    write_timestamp(&mut text, at).unwrap();
    text
}

#[test]
fn timestamps_are_rfc_3339_utc_with_microseconds() {
    assert_eq!(timestamp(0, 0), "1970-01-01T00:00:00.000000Z");
    assert_eq!(timestamp(951_782_400, 5), "2000-02-29T00:00:00.000005Z");
    assert_eq!(
        timestamp(1_795_453_199, 999_999),
        "2026-11-23T16:59:59.999999Z"
    );
    assert_eq!(
        timestamp(4_102_444_800, 120_000),
        "2100-01-01T00:00:00.120000Z"
    );
    assert_eq!(timestamp(253_402_300_799, 1), "9999-12-31T23:59:59.000001Z");
    // The cached second is per thread: going back and forth stays right.
    assert_eq!(timestamp(0, 1), "1970-01-01T00:00:00.000001Z");
}

#[test]
fn the_date_of_every_day_from_1970_to_2400_is_the_calendar_s() {
    let (mut year, mut month, mut day) = (1970_i64, 1_u64, 1_u64);
    for days in 0..(430 * 366) {
        assert_eq!(civil_from_days(days), (year, month, day), "day {days}");
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
        let length = match month {
            2 if leap => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        };
        day += 1;
        if day > length {
            day = 1;
            month += 1;
            if month > 12 {
                month = 1;
                year += 1;
            }
        }
    }
}

#[test]
fn a_clock_before_1970_is_left_to_the_default_timer() {
    let mut text = String::new();
    let before = UNIX_EPOCH - Duration::from_secs(1);
    write_timestamp(&mut text, before).unwrap();
    assert_eq!(
        text.len(),
        27,
        "the default timer writes the current time: {text}"
    );
}
