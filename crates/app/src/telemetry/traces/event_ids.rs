//! The ids of the trace an event was logged in: while traces are on, a log
//! line written inside a traced request (a 5xx's cause, a warning of the
//! store) ends with the current span's `trace_id` and `span_id`, as the
//! request's own line does (C11).
//!
//! Invariants: the line is the wrapped format's, byte for byte, plus the
//! two ids (JSON: two more members before the closing brace; text: two
//! more fields before the newline); outside a recorded span the line is
//! untouched. Only events pay (the request lines of the text log are not
//! events), and only while traces are on.
//!
//! Why a format of its own: the log's layers do not see the trace's spans
//! (each layer has its own filter), so the span list of the JSON format
//! cannot carry them.

use std::fmt;

use items_adapters::http::{RequestTracer as _, TraceIds};
use tracing::{Event, Span, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

use super::OtelRequestTracer;

/// `F`, with the current span's ids appended in `json` or text form.
#[derive(Debug)]
pub struct WithTraceIds<F> {
    inner: F,
    json: bool,
}

impl<F> WithTraceIds<F> {
    /// `inner`, the ids appended as JSON members (`json`) or text fields.
    pub fn new(inner: F, json: bool) -> Self {
        Self { inner, json }
    }
}

impl<S, N, F> FormatEvent<S, N> for WithTraceIds<F>
where
    S: Subscriber + for<'span> LookupSpan<'span>,
    N: for<'writer> FormatFields<'writer> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        context: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let current = Span::current();
        let ids = if current.is_disabled() {
            None
        } else {
            OtelRequestTracer::default().ids(&current)
        };
        let Some(ids) = ids else {
            return self.inner.format_event(context, writer, event);
        };
        let mut line = String::new();
        self.inner
            .format_event(context, Writer::new(&mut line), event)?;
        writer.write_str(&with_ids(&line, ids, self.json))
    }
}

/// `line` with the ids added where its format puts a last field.
fn with_ids(line: &str, ids: TraceIds, json: bool) -> String {
    let trace_id = ids.trace_id_hex();
    let span_id = ids.span_id_hex();
    let (trace_id, span_id) = (
        std::str::from_utf8(&trace_id).unwrap_or_default(),
        std::str::from_utf8(&span_id).unwrap_or_default(),
    );
    let body = line.strip_suffix('\n').unwrap_or(line);
    let newline = if body.len() < line.len() { "\n" } else { "" };
    if json && let Some(open) = body.strip_suffix('}') {
        format!("{open},\"trace_id\":\"{trace_id}\",\"span_id\":\"{span_id}\"}}{newline}")
    } else {
        format!("{body} trace_id={trace_id} span_id={span_id}{newline}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDS: TraceIds = TraceIds {
        trace_id: [0xab; 16],
        span_id: [0x01; 8],
    };

    #[test]
    fn the_ids_end_a_json_line_as_two_more_members_c11() {
        assert_eq!(
            with_ids(
                "{\"level\":\"WARN\",\"message\":\"store unavailable\"}\n",
                IDS,
                true
            ),
            "{\"level\":\"WARN\",\"message\":\"store unavailable\",\
             \"trace_id\":\"abababababababababababababababab\",\"span_id\":\"0101010101010101\"}\n"
        );
    }

    #[test]
    fn the_ids_end_a_text_line_as_two_more_fields_c11() {
        assert_eq!(
            with_ids("  WARN items_service: store unavailable\n", IDS, false),
            "  WARN items_service: store unavailable \
             trace_id=abababababababababababababababab span_id=0101010101010101\n"
        );
    }
}
