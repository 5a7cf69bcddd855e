//! The bound on spans waiting for the exporter, and the count of spans
//! lost: [`Bounded`] admits a span to the batch processor only while fewer
//! than its limit are admitted and not yet through the exporter
//! ([`Counted`] gives them back as each export returns); a span beyond the
//! limit, and every span of an export that failed, is counted in
//! [`DROPPED`] by reason.
//!
//! Invariants: a request never waits for the exporter: admitting a span is
//! two atomic operations and the processor's non-blocking send; the
//! processor's own queue holds more than the limit, so it never drops
//! first (its count is private); every admitted span is given back once,
//! when the export that took it returns, however it ended.
//!
//! Why: an exporter that is down or slow must cost the service spans, not
//! latency, and `/metrics` must say how many (C11).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};

/// Spans lost before reaching the collector, by `reason`: `queue_full`
/// (the exporter was behind by the limit) or `export_failed`.
pub const DROPPED: &str = "otel_spans_dropped_total";

/// Describes [`DROPPED`] and shows both series at 0 from the first scrape.
pub fn describe_metrics() {
    metrics::describe_counter!(
        DROPPED,
        "Trace spans lost before reaching the collector (OTEL_EXPORTER_OTLP_ENDPOINT), by reason: queue_full (the exporter is behind) or export_failed."
    );
    metrics::counter!(DROPPED, "reason" => "queue_full").increment(0);
    metrics::counter!(DROPPED, "reason" => "export_failed").increment(0);
}

/// Spans admitted and not yet through the exporter, shared by the
/// processor and the exporter.
#[derive(Debug, Default)]
pub struct Pending(AtomicUsize);

/// A span processor that admits at most `limit` pending spans to `inner`.
#[derive(Debug)]
pub struct Bounded<P> {
    inner: P,
    pending: Arc<Pending>,
    limit: usize,
}

impl<P> Bounded<P> {
    pub fn new(inner: P, pending: Arc<Pending>, limit: usize) -> Self {
        Self {
            inner,
            pending,
            limit,
        }
    }
}

impl<P: SpanProcessor> SpanProcessor for Bounded<P> {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        if self.pending.0.fetch_add(1, Ordering::AcqRel) >= self.limit {
            self.pending.0.fetch_sub(1, Ordering::AcqRel);
            metrics::counter!(DROPPED, "reason" => "queue_full").increment(1);
            return;
        }
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// An exporter that gives its spans back to [`Pending`] as each export
/// returns, and counts those of a failed export as dropped.
#[derive(Debug)]
pub struct Counted<E> {
    inner: E,
    pending: Arc<Pending>,
}

impl<E> Counted<E> {
    pub fn new(inner: E, pending: Arc<Pending>) -> Self {
        Self { inner, pending }
    }
}

impl<E: SpanExporter> SpanExporter for Counted<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let result = self.inner.export(batch).await;
        self.pending.0.fetch_sub(spans, Ordering::AcqRel);
        if result.is_err() {
            metrics::counter!(DROPPED, "reason" => "export_failed").increment(spans as u64);
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use opentelemetry::trace::{Tracer, TracerProvider};
    use opentelemetry_sdk::error::OTelSdkError;
    use opentelemetry_sdk::trace::{SdkTracerProvider, SimpleSpanProcessor};

    use super::*;

    /// A processor that keeps what it is handed, exporting nothing.
    #[derive(Debug, Default)]
    struct Held(Mutex<Vec<SpanData>>);

    impl SpanProcessor for Held {
        fn on_start(&self, _span: &mut Span, _cx: &Context) {}

        fn on_end(&self, span: SpanData) {
            self.0.lock().unwrap().push(span);
        }

        fn force_flush(&self) -> OTelSdkResult {
            Ok(())
        }

        fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
            Ok(())
        }
    }

    /// An exporter that keeps what it is sent, and succeeds.
    #[derive(Debug, Clone, Default)]
    struct Kept(Arc<Mutex<Vec<SpanData>>>);

    impl SpanExporter for Kept {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            self.0.lock().unwrap().extend(batch);
            Ok(())
        }
    }

    /// One finished span, as a processor is handed it.
    fn span() -> SpanData {
        let kept = Kept::default();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(SimpleSpanProcessor::new(kept.clone()))
            .build();
        drop(provider.tracer("test").start("span"));
        kept.0.lock().unwrap().remove(0)
    }

    #[test]
    fn spans_beyond_the_limit_are_dropped_not_queued_c11() {
        let pending = Arc::new(Pending::default());
        let bounded = Bounded::new(Held::default(), Arc::clone(&pending), 2);
        for _ in 0..5 {
            bounded.on_end(span());
        }
        assert_eq!(bounded.inner.0.lock().unwrap().len(), 2);
        assert_eq!(pending.0.load(Ordering::Acquire), 2);
    }

    /// An exporter whose every export fails.
    #[derive(Debug)]
    struct Down;

    impl SpanExporter for Down {
        async fn export(&self, _batch: Vec<SpanData>) -> OTelSdkResult {
            Err(OTelSdkError::InternalFailure("down".into()))
        }
    }

    #[test]
    fn an_export_gives_its_spans_back_whether_it_succeeded_or_failed_c11() {
        let pending = Arc::new(Pending(AtomicUsize::new(5)));
        let up = Counted::new(Kept::default(), Arc::clone(&pending));
        assert!(futures_executor_block_on(up.export(vec![span(), span()])).is_ok());
        assert_eq!(pending.0.load(Ordering::Acquire), 3);
        let down = Counted::new(Down, Arc::clone(&pending));
        assert!(futures_executor_block_on(down.export(vec![span(), span(), span()])).is_err());
        assert_eq!(pending.0.load(Ordering::Acquire), 0);
    }

    /// Runs a future that never waits on anything but itself.
    fn futures_executor_block_on<F: Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(future)
    }
}
