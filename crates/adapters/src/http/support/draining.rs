//! Whether the service has begun to stop (C1): the one signal the edge,
//! which then closes each connection after its response, and the change
//! streams, which then end (C14), both wait on.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether the service has begun to stop (C1): set when SIGINT/SIGTERM
/// arrives, before the drain delay, so every response from then on says
/// `Connection: close` and keep-alive clients reconnect — to another
/// instance — instead of racing the listener's close. Change streams wait
/// on it (`Draining::begun`) and end at once (C14).
#[derive(Debug, Clone, Default)]
pub struct Draining(Arc<DrainState>);

#[derive(Debug, Default)]
struct DrainState {
    begun: AtomicBool,
    /// Wakes whoever waits in [`Draining::begun`].
    waiters: tokio::sync::Notify,
}

impl Draining {
    /// Marks the stop as begun; every later response closes its connection,
    /// and every change stream ends.
    pub fn begin(&self) {
        self.0.begun.store(true, Ordering::SeqCst);
        self.0.waiters.notify_waiters();
    }

    /// Whether [`Draining::begin`] was called.
    pub fn has_begun(&self) -> bool {
        self.0.begun.load(Ordering::Relaxed)
    }

    /// Completes once [`Draining::begin`] was called (at once if it was).
    pub(crate) async fn begun(&self) {
        let notified = self.0.waiters.notified();
        let mut notified = std::pin::pin!(notified);
        // Registered before the flag is read, so a `begin` in between
        // still wakes this waiter.
        notified.as_mut().enable();
        if self.0.begun.load(Ordering::SeqCst) {
            return;
        }
        notified.await;
    }
}
