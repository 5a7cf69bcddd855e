//! Traces over OTLP (C11), configured by the standard `OTEL_*` variables:
//! the adapters' spans (target [`TARGET`]) become OpenTelemetry spans
//! through tracing-opentelemetry, and a batch span processor on a thread
//! of its own sends them to `OTEL_EXPORTER_OTLP_ENDPOINT`, over
//! `http/protobuf` (the default) or `grpc`.
//!
//! Invariants:
//! - off ([`Settings::from_env`] is `None`) unless an endpoint is set,
//!   `OTEL_SDK_DISABLED` is not `true` and `OTEL_TRACES_EXPORTER` is not
//!   `none`: then nothing of this module runs, and the log's filter keeps
//!   the adapters' span callsites disabled;
//! - only spans of [`TARGET`] reach the trace layer, and the log's layers
//!   never see them (each layer has its own filter while traces are on);
//! - a request never waits for the exporter: spans are handed to the
//!   batch processor without blocking, at most `OTEL_BSP_MAX_QUEUE_SIZE`
//!   wait for it, and the rest are dropped and counted (`bounded.rs`);
//! - the sampler is the SDK's from `OTEL_TRACES_SAMPLER` and
//!   `OTEL_TRACES_SAMPLER_ARG` (default: parent-based, always on); the
//!   service's name is `OTEL_SERVICE_NAME`, else `items-service`;
//! - the tracer provider is built inside the Tokio runtime (the gRPC
//!   channel's task lives there) and shut down before it ends.
//!
//! Why the SDK's thread-based processor: its exports never run on the
//! workers that serve requests.

mod bounded;
mod event_ids;

use std::sync::Arc;
use std::time::Duration;

use items_adapters::http::{RequestTracer, TraceIds};
use items_adapters::traces::TARGET;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_otlp::{SpanExporter, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;

pub use bounded::{DROPPED, describe_metrics};
pub use event_ids::WithTraceIds;

/// The service's name when `OTEL_SERVICE_NAME` does not give one.
pub const SERVICE_NAME: &str = "items-service";

/// How long the exit waits for the last spans to be sent.
const SHUTDOWN_PATIENCE: Duration = Duration::from_secs(2);

/// The transport `OTEL_EXPORTER_OTLP_PROTOCOL` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `http/protobuf`, the specification's default.
    HttpProtobuf,
    /// `grpc`.
    Grpc,
}

/// What the `OTEL_*` variables ask for, when traces are on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The transport (`OTEL_EXPORTER_OTLP_PROTOCOL`).
    pub protocol: Protocol,
    /// Spans that may wait for the exporter (`OTEL_BSP_MAX_QUEUE_SIZE`).
    pub queue: usize,
}

impl Settings {
    /// Reads the standard variables from `var`. `Ok(None)`: traces are off.
    ///
    /// # Errors
    /// One line naming the variable whose value cannot be used (C1).
    pub fn from(var: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, String> {
        let set = |name: &str| var(name).filter(|value| !value.trim().is_empty());
        if set("OTEL_SDK_DISABLED").is_some_and(|value| value.trim().eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        match set("OTEL_TRACES_EXPORTER").as_deref().map(str::trim) {
            None | Some("otlp") => {}
            Some("none") => return Ok(None),
            Some(other) => {
                return Err(format!(
                    "invalid OTEL_TRACES_EXPORTER {other:?}: this build exports `otlp` or `none`"
                ));
            }
        }
        if set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_none()
            && set("OTEL_EXPORTER_OTLP_ENDPOINT").is_none()
        {
            return Ok(None);
        }
        let (name, protocol) = match set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") {
            Some(value) => ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", Some(value)),
            None => (
                "OTEL_EXPORTER_OTLP_PROTOCOL",
                set("OTEL_EXPORTER_OTLP_PROTOCOL"),
            ),
        };
        let protocol = match protocol.as_deref().map(str::trim) {
            None | Some("http/protobuf") => Protocol::HttpProtobuf,
            Some("grpc") => Protocol::Grpc,
            Some(other) => {
                return Err(format!(
                    "invalid {name} {other:?}: expected `http/protobuf` or `grpc`"
                ));
            }
        };
        // As the SDK reads it: a value that is not a positive number is
        // left for the default.
        let queue = set("OTEL_BSP_MAX_QUEUE_SIZE")
            .and_then(|value| value.trim().parse::<usize>().ok())
            .filter(|&queue| queue > 0)
            .unwrap_or(opentelemetry_sdk::trace::OTEL_BSP_MAX_QUEUE_SIZE_DEFAULT);
        Ok(Some(Self { protocol, queue }))
    }

    /// [`Settings::from`] the process's environment.
    ///
    /// # Errors
    /// As [`Settings::from`].
    pub fn from_env() -> Result<Option<Self>, String> {
        Self::from(|name| std::env::var(name).ok())
    }
}

/// The running trace pipeline; dropping it sends what is left (waiting
/// 2 s at most) and stops the processor's thread. Drop it
/// outside async code, while the runtime it was built in still runs, and
/// before the log's writer: a collector that does not answer holds the
/// exit for those 2 s, after the `stopped` line, and the log says so.
#[derive(Debug)]
pub struct Traces {
    provider: SdkTracerProvider,
}

impl Drop for Traces {
    fn drop(&mut self) {
        if let Err(error) = self.provider.shutdown_with_timeout(SHUTDOWN_PATIENCE) {
            tracing::warn!(
                %error,
                "the last spans were not sent: the OTLP collector did not take them within \
                 {} s; exiting without them",
                SHUTDOWN_PATIENCE.as_secs()
            );
        }
    }
}

/// The pipeline and the layer that feeds it, filtered to [`TARGET`].
pub type Started<S> = (Traces, Box<dyn Layer<S> + Send + Sync>);

/// Builds the exporter, the bounded batch processor and the provider, and
/// the layer turning the adapters' spans into OpenTelemetry spans. Call it
/// inside the Tokio runtime.
///
/// # Errors
/// One line saying why the exporter cannot be built (an invalid endpoint).
pub fn start<S>(settings: &Settings) -> Result<Started<S>, String>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span> + Send + Sync,
{
    let exporter = match settings.protocol {
        Protocol::HttpProtobuf => SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .build(),
        Protocol::Grpc => SpanExporter::builder()
            .with_tonic()
            .with_protocol(opentelemetry_otlp::Protocol::Grpc)
            .build(),
    }
    .map_err(|error| format!("invalid OTEL_EXPORTER_OTLP_ENDPOINT: {error}"))?;
    let pending = Arc::new(bounded::Pending::default());
    // The processor's own queue holds twice the bound: it never drops a
    // span itself (its count is private), the bound does and counts.
    let config = BatchConfigBuilder::default()
        .with_max_queue_size(settings.queue.saturating_mul(2))
        .build();
    let processor = BatchSpanProcessor::new(
        bounded::Counted::new(exporter, Arc::clone(&pending)),
        config,
    );
    let provider = SdkTracerProvider::builder()
        .with_span_processor(bounded::Bounded::new(processor, pending, settings.queue))
        .with_resource(resource())
        .build();
    let layer = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer(SERVICE_NAME))
        // Attributes the spans do not need, each a cost per span.
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
        .with_filter(Targets::new().with_target(TARGET, tracing::Level::TRACE))
        .boxed();
    Ok((Traces { provider }, layer))
}

/// The resource the SDK detects from the environment (`OTEL_SERVICE_NAME`,
/// `OTEL_RESOURCE_ATTRIBUTES`), named [`SERVICE_NAME`] when neither names
/// the service.
fn resource() -> Resource {
    let named = std::env::var("OTEL_SERVICE_NAME").is_ok_and(|name| !name.trim().is_empty())
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES")
            .is_ok_and(|attributes| attributes.contains("service.name="));
    let builder = Resource::builder();
    if named {
        builder.build()
    } else {
        builder.with_service_name(SERVICE_NAME).build()
    }
}

/// The HTTP edge's way to OpenTelemetry (see [`RequestTracer`]): W3C
/// Trace Context in, span ids out.
#[derive(Debug, Default)]
pub struct OtelRequestTracer {
    propagator: TraceContextPropagator,
}

/// The two Trace Context headers of a request, as the propagator reads them.
struct Headers<'a> {
    traceparent: &'a str,
    tracestate: Option<&'a str>,
}

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            "traceparent" => Some(self.traceparent),
            "tracestate" => self.tracestate,
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        vec!["traceparent", "tracestate"]
    }
}

impl RequestTracer for OtelRequestTracer {
    fn continue_trace(&self, span: &Span, traceparent: Option<&str>, tracestate: Option<&str>) {
        let Some(traceparent) = traceparent.filter(|value| well_formed(value)) else {
            return;
        };
        let parent = self.propagator.extract(&Headers {
            traceparent,
            tracestate,
        });
        // A malformed `traceparent` reads as no remote span: a new trace.
        if parent.span().span_context().is_valid() {
            let _ = span.set_parent(parent);
        }
    }

    fn rename(&self, span: &Span, name: String) {
        span.context().span().update_name(name);
    }

    fn ids(&self, span: &Span) -> Option<TraceIds> {
        let context = span.context();
        let span = context.span();
        let ids = span.span_context();
        ids.is_sampled().then(|| TraceIds {
            trace_id: ids.trace_id().to_bytes(),
            span_id: ids.span_id().to_bytes(),
        })
    }
}

/// Whether `traceparent` has W3C Trace Context's shape: version, trace
/// id, parent id and flags in 2, 32, 16 and 2 lowercase hexadecimal digits
/// (version `ff` is invalid; version `00` has exactly those four parts).
/// The SDK's propagator also takes shorter ids, which the specification
/// says to ignore.
fn well_formed(traceparent: &str) -> bool {
    let parts: Vec<&str> = traceparent.split('-').collect();
    let hex = |part: &str, length: usize| {
        part.len() == length
            && part
                .bytes()
                .all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'))
    };
    match parts.as_slice() {
        [version, trace_id, parent_id, flags, rest @ ..] => {
            hex(version, 2)
                && *version != "ff"
                && (rest.is_empty() || *version != "00")
                && hex(trace_id, 32)
                && hex(parent_id, 16)
                && hex(flags, 2)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Result<Option<Settings>, String> {
        Settings::from(|name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        })
    }

    const ENDPOINT: (&str, &str) = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");

    #[test]
    fn traces_are_off_without_an_endpoint_or_when_the_sdk_is_disabled_c11() {
        assert_eq!(settings(&[]), Ok(None));
        assert_eq!(settings(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")]), Ok(None));
        assert_eq!(
            settings(&[ENDPOINT, ("OTEL_SDK_DISABLED", "TRUE")]),
            Ok(None)
        );
        assert_eq!(
            settings(&[ENDPOINT, ("OTEL_TRACES_EXPORTER", "none")]),
            Ok(None)
        );
    }

    #[test]
    fn http_protobuf_is_the_default_and_grpc_is_chosen_by_name_c11() {
        let on = |protocol| {
            Ok(Some(Settings {
                protocol,
                queue: 2048,
            }))
        };
        assert_eq!(settings(&[ENDPOINT]), on(Protocol::HttpProtobuf));
        assert_eq!(
            settings(&[ENDPOINT, ("OTEL_SDK_DISABLED", "false")]),
            on(Protocol::HttpProtobuf)
        );
        assert_eq!(
            settings(&[ENDPOINT, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]),
            on(Protocol::Grpc)
        );
        assert_eq!(
            settings(&[
                (
                    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                    "http://127.0.0.1:4317"
                ),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
                ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"),
            ]),
            on(Protocol::Grpc)
        );
    }

    #[test]
    fn an_unusable_protocol_is_one_line_naming_its_variable_c1() {
        let error = settings(&[ENDPOINT, ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")])
            .expect_err("http/json is not built in");
        assert!(
            error.starts_with("invalid OTEL_EXPORTER_OTLP_PROTOCOL"),
            "{error}"
        );
        assert!(!error.contains('\n'));
    }

    #[test]
    fn the_queue_bound_is_otel_bsp_max_queue_size_c11() {
        let queue = |value| {
            settings(&[ENDPOINT, ("OTEL_BSP_MAX_QUEUE_SIZE", value)])
                .unwrap()
                .unwrap()
                .queue
        };
        assert_eq!(queue("16"), 16);
        assert_eq!(queue("0"), 2048);
        assert_eq!(queue("many"), 2048);
    }

    #[test]
    fn a_malformed_traceparent_starts_a_new_trace_never_an_error_c11() {
        let tracer = OtelRequestTracer::default();
        let parent = |traceparent: &str| {
            well_formed(traceparent)
                && tracer
                    .propagator
                    .extract(&Headers {
                        traceparent,
                        tracestate: None,
                    })
                    .span()
                    .span_context()
                    .is_valid()
        };
        assert!(parent(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        ));
        for malformed in [
            "",
            "garbage",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "zz-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert!(!parent(malformed), "{malformed:?} names no parent");
        }
        // Not in a span: nothing to continue, and no panic either.
        tracer.continue_trace(&Span::none(), Some("garbage"), Some("\u{0}"));
    }
}
