//! The direct request line writes exactly what the default text format writes for the event.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, UNIX_EPOCH};

use items_adapters::http::TraceIds;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;

use super::*;

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
    /// space), which differ by the time each was written.
    fn lines(&self) -> Vec<String> {
        String::from_utf8(self.0.lock().unwrap().clone())
            .unwrap()
            .lines()
            .map(|line| line[28..].to_owned())
            .collect()
    }
}

fn record(method: &'static str, path: &'static str, status: u16) -> RequestRecord<'static> {
    RequestRecord {
        method,
        path,
        status,
        latency_us: 17,
        finished: Instant::now(),
        trace: None,
    }
}

/// Requests whose lines the direct path writes itself, a traced one (C11)
/// last.
fn plain() -> [RequestRecord<'static>; 5] {
    [
        RequestRecord {
            method: "GET",
            path: "/",
            status: 200,
            latency_us: 17,
            finished: Instant::now(),
            trace: None,
        },
        RequestRecord {
            method: "PUT",
            path: "/items/7",
            status: 404,
            latency_us: 0,
            finished: Instant::now(),
            trace: None,
        },
        RequestRecord {
            method: "PROPFIND",
            path: "/a%20b?",
            status: 405,
            latency_us: u64::MAX,
            finished: Instant::now(),
            trace: None,
        },
        RequestRecord {
            method: "POST",
            path: "",
            status: 201,
            latency_us: 1_234_567,
            finished: Instant::now(),
            trace: None,
        },
        RequestRecord {
            method: "GET",
            path: "/items/1",
            status: 200,
            latency_us: 5,
            finished: Instant::now(),
            trace: Some(TraceIds {
                trace_id: [0x4b; 16],
                span_id: [0xf0; 8],
            }),
        },
    ]
}

/// What tracing-subscriber's default text format, as the log installs it,
/// writes for the request events of the HTTP adapter's default sink, under
/// `filter`.
fn default_format_lines(filter: &str, log: impl FnOnce()) -> Vec<String> {
    let captured = Captured::default();
    let layer = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .with_writer(captured.clone());
    let subscriber = tracing_subscriber::registry()
        .with(tracing_subscriber::EnvFilter::new(filter))
        .with(layer);
    tracing::subscriber::with_default(subscriber, log);
    captured.lines()
}

#[test]
fn the_direct_line_is_byte_for_byte_the_default_text_format_of_the_event_c1() {
    let events = default_format_lines("info", || {
        for record in &plain() {
            TracingRequestLog.write(record);
        }
    });
    let direct: Vec<String> = plain()
        .iter()
        .map(|record| {
            let mut line = Vec::new();
            write_line(&mut line, record, since_epoch(Instant::now()));
            let line = String::from_utf8(line).unwrap();
            assert!(line.ends_with('\n'), "one whole line: {line:?}");
            line.trim_end()[28..].to_owned()
        })
        .collect();
    assert_eq!(direct, events);
    assert_eq!(
        direct[0],
        " INFO items_service::request: method=GET path=\"/\" status=200 latency_us=17"
    );
}

/// What a [`TextRequestLog`] writes under `filter`: the lines it wrote
/// itself, and the lines that went through the event.
fn text_request_log_lines(
    filter: &str,
    records: &[RequestRecord<'_>],
) -> (Vec<String>, Vec<String>) {
    let direct = Captured::default();
    let (lines, guard) = super::super::line_batches::start(direct.clone()).unwrap();
    let events = default_format_lines(filter, || {
        let log = text_request_log(lines);
        for record in records {
            log.write(record);
        }
    });
    drop(guard); // writes what is still buffered
    (direct.lines(), events)
}

#[test]
fn plain_lines_are_written_directly_and_the_others_go_through_the_event_c1() {
    let escaped = record("GET", "/a\"b\u{1b}[31m", 404);
    let gone = record("POST", "/profile", items_adapters::http::CLIENT_CLOSED);
    let mut records = plain().to_vec();
    records.extend([escaped, gone]);

    let (direct, events) = text_request_log_lines("info", &records);

    assert_eq!(direct.len(), plain().len(), "{direct:?}");
    assert!(direct[0].ends_with("method=GET path=\"/\" status=200 latency_us=17"));
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(
        events[0].contains(r#"path="/a\"b\u{1b}[31m""#),
        "escaped as the default format escapes: {}",
        events[0]
    );
    assert!(
        events[1].contains("the client went away before the response")
            && events[1].contains("status=499"),
        "{}",
        events[1]
    );
}

#[test]
fn rust_log_still_silences_the_request_lines_c1() {
    let records = [plain()[0], record("GET", "/a\"b", 200)];
    for filter in ["warn", "info,items_service::request=warn", "off"] {
        let (direct, events) = text_request_log_lines(filter, &records);
        assert!(
            direct.is_empty() && events.is_empty(),
            "{filter}: {direct:?} {events:?}"
        );
    }
    let (direct, events) = text_request_log_lines("warn,items_service::request=info", &records);
    assert_eq!((direct.len(), events.len()), (1, 1));
}

fn timestamp(seconds: u64, micros: u32) -> String {
    let mut text = Vec::new();
    let at = Duration::from_secs(seconds) + Duration::from_micros(u64::from(micros));
    write_timestamp(&mut text, Some(at));
    String::from_utf8(text).unwrap()
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
    let mut text = Vec::new();
    write_timestamp(&mut text, None);
    assert_eq!(
        text.len(),
        27,
        "the default timer writes the current time: {text:?}"
    );
}

/// The wall clock now, since the Unix epoch.
fn wall_now() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap()
}

#[test]
fn a_line_is_dated_by_the_wall_clock_when_its_response_was_ready_c1() {
    let finished = Instant::now();
    let dated = since_epoch(finished).unwrap();
    assert!(wall_now().abs_diff(dated) < Duration::from_millis(50));
    // Later instants on the same anchor keep their distance to the first.
    let later = since_epoch(finished + Duration::from_millis(300)).unwrap();
    assert_eq!(later - dated, Duration::from_millis(300));
}

#[test]
fn an_instant_past_the_anchor_s_lifetime_reads_the_wall_clock_again_c1() {
    // Anchored now; an instant two lifetimes on renews the anchor, and is
    // still dated that far from now, not from the old anchor alone.
    let now = since_epoch(Instant::now()).unwrap();
    let ahead = since_epoch(Instant::now() + 2 * ANCHOR_LIFETIME).unwrap();
    let gap = ahead - now;
    assert!(
        gap >= 2 * ANCHOR_LIFETIME && gap < 2 * ANCHOR_LIFETIME + Duration::from_millis(50),
        "{gap:?}"
    );
    // An instant before the renewed anchor is dated before it, and close to
    // the wall clock.
    let before = since_epoch(Instant::now()).unwrap();
    assert!(before < ahead);
    assert!(wall_now().abs_diff(before) < Duration::from_millis(50));
}
