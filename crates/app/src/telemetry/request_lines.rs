//! The text log's fast path for its most frequent line, the one per request.
//!
//! tracing-subscriber's default text format writes every line through
//! `core::fmt`: the timestamp field by field, the level and the target
//! through `nu_ansi_term` styles (even with colours off), each field's value
//! through its `Debug`. Profiled (`callgrind`, `GET /`), that came to about
//! 8,000 instructions per request: 45% of what the service spent above a
//! bare actix-web handler. [`TextLines`] writes the same bytes for events of
//! the request target with plain string copies — the date and time up to
//! the second formatted once per second and thread, integers with `itoa`,
//! strings copied as they are when they need no escaping — and hands every
//! other event to the default format. A unit test holds the two to the same
//! bytes.

use std::cell::Cell;
use std::fmt::{self, Write as _};
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::FmtContext;
use tracing_subscriber::fmt::format::{Format, FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime as DefaultTimer};
use tracing_subscriber::registry::LookupSpan;

/// The target of the HTTP adapter's one line per request.
pub const REQUEST_TARGET: &str = "items_service::request";

/// The text format: request lines on the fast path, the rest as
/// tracing-subscriber's default `Full` format writes them.
#[derive(Debug, Default)]
pub struct TextLines {
    full: Format,
}

impl<S, N> FormatEvent<S, N> for TextLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let metadata = event.metadata();
        // Colours and span prefixes are the default format's business; the
        // service writes neither for its request lines.
        if metadata.target() != REQUEST_TARGET
            || writer.has_ansi_escapes()
            || ctx.event_scope().is_some()
        {
            return self.full.format_event(ctx, writer, event);
        }
        LINE.with_borrow_mut(|line| {
            // The whole line is put together here and handed to the writer
            // in one call: each of the writer's calls is a dynamic one.
            line.clear();
            write_timestamp(line, SystemTime::now())?;
            line.push(' ');
            line.push_str(level_label(metadata.level()));
            line.push(' ');
            line.push_str(metadata.target());
            line.push_str(": ");
            let mut fields = PlainFields {
                line: &mut *line,
                first: true,
                supported: true,
            };
            event.record(&mut fields);
            if !fields.supported {
                return self.full.format_event(ctx, writer, event);
            }
            #[cfg(test)]
            tests::FAST_LINES.with(|count| count.set(count.get() + 1));
            line.push('\n');
            writer.write_str(line)
        })
    }
}

/// The level as the default format pads it without colours.
fn level_label(level: &Level) -> &'static str {
    match *level {
        Level::TRACE => "TRACE",
        Level::DEBUG => "DEBUG",
        Level::INFO => " INFO",
        Level::WARN => " WARN",
        Level::ERROR => "ERROR",
    }
}

thread_local! {
    /// The fields of the line being written, reused from line to line.
    static LINE: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
    /// The last second written by this thread and its text,
    /// `YYYY-MM-DDTHH:MM:SS.`: a busy worker formats the date once a second.
    static SECOND: Cell<(u64, [u8; 20])> = const { Cell::new((u64::MAX, [0; 20])) };
}

/// `2026-11-23T16:50:00.123456Z`, UTC with microseconds, as
/// tracing-subscriber's `SystemTime` timer writes it. Outside 1970–9999
/// (a clock gone wrong) that timer writes the time itself.
fn write_timestamp(line: &mut String, now: SystemTime) -> fmt::Result {
    let Ok(since_epoch) = now.duration_since(UNIX_EPOCH) else {
        return DefaultTimer.format_time(&mut Writer::new(line));
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
        return DefaultTimer.format_time(&mut Writer::new(line));
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
    line.push_str(std::str::from_utf8(&text).map_err(|_| fmt::Error)?);
    Ok(())
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

/// Writes fields as the default format's visitor does (`name=value`,
/// separated by a space, values as their `Debug`), without going through
/// `core::fmt` for strings and integers. A `message` (which the default
/// format writes without its name and with terminal escapes neutralised)
/// and an error (with its chain of sources) are left to the default format:
/// the request line has neither.
struct PlainFields<'a> {
    line: &'a mut String,
    first: bool,
    supported: bool,
}

impl PlainFields<'_> {
    /// Writes the separator and `name=`; `None` when the field is left to
    /// the default format.
    fn start(&mut self, field: &Field) -> Option<&mut String> {
        let name = field.name();
        if !self.supported || name == "message" {
            self.supported = false;
            return None;
        }
        if !self.first {
            self.line.push(' ');
        }
        self.first = false;
        self.line.push_str(name.strip_prefix("r#").unwrap_or(name));
        self.line.push('=');
        Some(self.line)
    }
}

impl Visit for PlainFields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if let Some(line) = self.start(field) {
            if needs_no_escaping(value) {
                line.push('"');
                line.push_str(value);
                line.push('"');
            } else {
                let _ = write!(line, "{value:?}");
            }
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if let Some(line) = self.start(field) {
            line.push_str(itoa::Buffer::new().format(value));
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if let Some(line) = self.start(field) {
            line.push_str(itoa::Buffer::new().format(value));
        }
    }

    fn record_error(&mut self, _: &Field, _: &(dyn std::error::Error + 'static)) {
        self.supported = false;
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if let Some(line) = self.start(field) {
            let _ = write!(line, "{value:?}");
        }
    }
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
