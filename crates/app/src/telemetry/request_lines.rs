//! The text log's request lines, written straight into the log's buffers.
//!
//! The HTTP adapter hands every request to a [`RequestLog`]; by default it
//! becomes a `tracing` event, written by tracing-subscriber's text format.
//! For the line the service writes most, [`TextRequestLog`] writes the same
//! bytes itself, with string copies: the date and time up to the second
//! formatted once per second and thread, integers with `itoa`.
//!
//! Invariants:
//! - the direct line is byte for byte the default format's (a unit test
//!   holds it);
//! - `RUST_LOG` still decides: [`text_request_log`] asks `tracing`, once
//!   the subscriber is installed, whether it lets request lines through
//!   (its filter is fixed from then on), and writes them directly only
//!   then;
//! - a line the plain copy cannot write as the default format would (a
//!   path that needs escaping, a client that went away, which carries a
//!   message) is handed to the event.
//!
//! Why (the event goes through `core::fmt`: every layer's dispatch, each
//! field visited, the timestamp field by field, `nu_ansi_term` styles even
//! with colours off): a `GET /`'s line ~8,100 instructions through the
//! event, ~1,900 behind a fast formatter, 630 direct (callgrind),
//! docs/performance.md "The HTTP edge and the request log, measured".

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use items_adapters::http::{REQUEST_TARGET, RequestLog, RequestRecord, TracingRequestLog};
use tracing::Level;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime as DefaultTimer};

use super::line_batches::LineBatches;

/// The request log of a text log written through `lines`, under the
/// subscriber installed now: the direct lines when it lets request lines
/// through, else the events, which it then drops at their callsite. Asking
/// per request cost 200 instructions: the filter's interest in the target is
/// "sometimes", since the log's layers filter on their own.
pub fn text_request_log(lines: LineBatches) -> Arc<dyn RequestLog> {
    if tracing::enabled!(target: REQUEST_TARGET, Level::INFO) {
        Arc::new(TextRequestLog { lines })
    } else {
        Arc::new(TracingRequestLog)
    }
}

/// Request lines written directly into the log's per-thread buffers (see
/// the module's documentation).
#[derive(Debug)]
struct TextRequestLog {
    lines: LineBatches,
}

impl RequestLog for TextRequestLog {
    fn write(&self, record: &RequestRecord<'_>) {
        if record.client_went_away() || !needs_no_escaping(record.path) {
            return TracingRequestLog.write(record);
        }
        let finished = since_epoch(record.finished);
        self.lines
            .append_with(|buffer| write_line(buffer, record, finished));
    }
}

/// The line the default text format writes for the request event:
/// `<time>  INFO items_service::request: method=GET path="/" status=200
/// latency_us=17`, for a traced request (C11) ` trace_id=… span_id=…`,
/// and a newline.
fn write_line(line: &mut Vec<u8>, record: &RequestRecord<'_>, since_epoch: Option<Duration>) {
    write_timestamp(line, since_epoch);
    for part in [
        BEFORE_METHOD,
        record.method,
        " path=\"",
        record.path,
        "\" status=",
        itoa::Buffer::new().format(record.status),
        " latency_us=",
        itoa::Buffer::new().format(record.latency_us),
    ] {
        line.extend_from_slice(part.as_bytes());
    }
    if let Some(ids) = record.trace {
        line.extend_from_slice(b" trace_id=");
        line.extend_from_slice(&ids.trace_id_hex());
        line.extend_from_slice(b" span_id=");
        line.extend_from_slice(&ids.span_id_hex());
    }
    line.push(b'\n');
}

/// The level, the target and the first field's name, one copy instead of
/// three ([`REQUEST_TARGET`] is a `const`, which `concat!` cannot take; a
/// test holds the two equal).
const BEFORE_METHOD: &str = "  INFO items_service::request: method=";

/// How long a thread's reading of both clocks serves: the bound on how far
/// a line's time may drift from the wall clock (NTP slews it by 500 ppm at
/// most, so 0.5 ms), and on how late a step of the wall clock shows.
const ANCHOR_LIFETIME: Duration = Duration::from_secs(1);

thread_local! {
    /// This thread's reading of both clocks: the monotonic one, and the wall
    /// one as time since the Unix epoch; renewed once an [`ANCHOR_LIFETIME`].
    static ANCHOR: Cell<Option<(Instant, Duration)>> = const { Cell::new(None) };
}

/// The wall-clock time of `at`, since the Unix epoch: this thread's anchor
/// plus the monotonic time since; `None` when the wall clock reads before
/// 1970. The edge read the monotonic clock when the response was ready;
/// reading the wall clock again for every line costs ~25–30 ns more
/// (docs/performance.md "The HTTP edge and the request log, measured"), so
/// a thread reads it once a second.
fn since_epoch(at: Instant) -> Option<Duration> {
    ANCHOR
        .try_with(|anchor| {
            if let Some((monotonic, epoch)) = anchor.get()
                && let Some(after) = at.checked_duration_since(monotonic)
                && after < ANCHOR_LIFETIME
            {
                return epoch.checked_add(after);
            }
            let monotonic = Instant::now();
            let epoch = SystemTime::now().duration_since(UNIX_EPOCH).ok()?;
            anchor.set(Some((monotonic, epoch)));
            // `at` was read before, so it precedes the fresh anchor by the
            // nanoseconds between them.
            match at.checked_duration_since(monotonic) {
                Some(after) => epoch.checked_add(after),
                None => epoch.checked_sub(monotonic.duration_since(at)),
            }
        })
        // This thread's locals are being destroyed: read the wall clock.
        .unwrap_or_else(|_| SystemTime::now().duration_since(UNIX_EPOCH).ok())
}

thread_local! {
    /// The last second written by this thread and its text,
    /// `YYYY-MM-DDTHH:MM:SS.`: a busy worker formats the date once a second.
    static SECOND: Cell<(u64, [u8; 20])> = const { Cell::new((u64::MAX, [0; 20])) };
}

/// `2026-11-23T16:50:00.123456Z`, UTC with microseconds, as
/// tracing-subscriber's `SystemTime` timer writes it. Outside 1970–9999
/// (a clock gone wrong) that timer writes the time itself.
fn write_timestamp(line: &mut Vec<u8>, since_epoch: Option<Duration>) {
    let Some(since_epoch) = since_epoch else {
        return write_default_time(line);
    };
    let seconds = since_epoch.as_secs();
    let prefix = SECOND.with(|cached| {
        let (second, text) = cached.get();
        if second == seconds {
            return Some(text);
        }
        let text = second_text(seconds)?;
        cached.set((seconds, text));
        Some(text)
    });
    let Some(prefix) = prefix else {
        return write_default_time(line);
    };
    // The prefix is ASCII digits and separators, and so are the micros.
    let mut text = [b'0'; 27];
    text[..20].copy_from_slice(&prefix);
    let mut value = since_epoch.subsec_micros();
    for digit in text[20..26].iter_mut().rev() {
        *digit = b'0' + (value % 10) as u8;
        value /= 10;
    }
    text[26] = b'Z';
    line.extend_from_slice(&text);
}

/// The time as tracing-subscriber's `SystemTime` timer writes it (the
/// current time, whatever was asked: it reads the clock itself).
fn write_default_time(line: &mut Vec<u8>) {
    let mut time = String::new();
    let _ = DefaultTimer.format_time(&mut Writer::new(&mut time));
    line.extend_from_slice(time.as_bytes());
}

/// `YYYY-MM-DDTHH:MM:SS.` for a second since the epoch; `None` past 9999.
fn second_text(seconds: u64) -> Option<[u8; 20]> {
    let days = seconds / 86_400;
    let of_day = seconds % 86_400;
    let (year, month, day) = civil_from_days(i64::try_from(days).ok()?);
    if !(0..=9999).contains(&year) {
        return None;
    }
    let mut text = [0u8; 20];
    let mut put = |at: usize, value: u64, width: usize| {
        let mut value = value;
        for index in (at..at + width).rev() {
            text[index] = b'0' + (value % 10) as u8;
            value /= 10;
        }
    };
    put(0, year as u64, 4);
    put(5, month, 2);
    put(8, day, 2);
    put(11, of_day / 3600, 2);
    put(14, of_day / 60 % 60, 2);
    put(17, of_day % 60, 2);
    for (index, separator) in [
        (4, b'-'),
        (7, b'-'),
        (10, b'T'),
        (13, b':'),
        (16, b':'),
        (19, b'.'),
    ] {
        text[index] = separator;
    }
    Some(text)
}

/// The proleptic Gregorian date of a day since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u64, u64) {
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u64;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u64;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// A string whose `Debug` is itself in quotes: printable ASCII without `"`
/// or `\`.
fn needs_no_escaping(value: &str) -> bool {
    value
        .bytes()
        .all(|byte| (0x20..0x7f).contains(&byte) && byte != b'"' && byte != b'\\')
}

#[cfg(test)]
mod tests;
