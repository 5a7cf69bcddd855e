//! The public server: binding it, the edge around the routes, the
//! timeouts and graceful shutdown.

use std::future::Future;
use std::net::TcpListener;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::ServerHandle;
use actix_web::{App, web};
use parking_lot::Mutex;

use super::front_door::FrontDoor;
use super::routes;
use super::services::Services;
use super::settings::HttpSettings;
use crate::http::edge::{Edge, EdgeLayer, Limiter};
use crate::http::metrics::RequestMetrics;
use crate::http::resources::{ChangeStreams, Uploads};
use crate::http::support::consistency;

/// How long a client may take to send its request head, and how long an
/// idle keep-alive connection is kept. Both are actix-web's defaults, set
/// here on purpose: together with
/// [`BodyLimits::read_timeout`](crate::http::BodyLimits::read_timeout) they
/// bound how long a slow or silent client can hold a connection.
const REQUEST_HEAD_TIMEOUT: Duration = Duration::from_secs(5);
const KEEP_ALIVE: Duration = Duration::from_secs(5);
/// C1: requests in flight get up to 30 s to finish after SIGINT/SIGTERM.
const SHUTDOWN_GRACE_SECS: u64 = 30;
/// A bound, not yet running, HTTP server.
pub struct HttpServer {
    server: actix_web::dev::Server,
    port: u16,
    front_door: SharedDoor,
}

/// The second handle on the listening socket (`front_door.rs`), until the
/// shutdown signal closes the port with it or a [`HttpServerHandle`] stop
/// lets it go.
type SharedDoor = Arc<Mutex<Option<FrontDoor>>>;

/// Stops an [`HttpServer`] from elsewhere (tests, an embedding program).
#[derive(Clone, Debug)]
pub struct HttpServerHandle {
    server: ServerHandle,
    front_door: SharedDoor,
}

impl HttpServerHandle {
    /// Stops the server as actix-web's handle does: `graceful` lets
    /// requests in flight finish. The stop is sent at once; the future
    /// completes when the server has stopped. The port closes when
    /// actix-server's accept thread lets the listener go, as before the
    /// front door: the door's own handle on the socket is dropped first,
    /// so it cannot keep the port listening, with nobody accepting, for as
    /// long as the requests in flight take.
    pub fn stop(&self, graceful: bool) -> impl Future<Output = ()> + use<> {
        drop(self.front_door.lock().take());
        self.server.stop(graceful)
    }
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

impl HttpServer {
    /// Serves `services` on `listener`. When `shutdown` completes the server
    /// refuses new clients, serves the ones already connected, stops
    /// accepting and lets requests in flight finish (graceful for both
    /// SIGINT and SIGTERM: actix-web would treat SIGINT as a forced stop).
    pub fn bind(
        listener: TcpListener,
        settings: HttpSettings,
        services: Services,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<Self> {
        let port = listener.local_addr()?.port();
        // The stop closes the listener to new clients first, so none that
        // already connected is reset when actix-server closes it.
        let front_door = Arc::new(Mutex::new(Some(FrontDoor::of(&listener)?)));
        let door = Arc::clone(&front_door);
        let shutdown = async move {
            shutdown.await;
            let door = door.lock().take();
            if let Some(door) = door {
                door.close_to_new_clients().await;
            }
        };
        let items = web::Data::new(services.items);
        let products = web::Data::new(services.products);
        let users = web::Data::new(services.users);
        let reads = web::Data::new(consistency::Reads(services.reads));
        let uploads = web::Data::new(Uploads::new(services.uploads, settings.upload_limits));
        let body_limits = settings.body_limits;
        let spooling = web::Data::new(settings.spool);
        // One limiter for all workers, so a client's budget is per process
        // (or per fleet, over Redis), not per worker thread.
        let limiter = Arc::new(Limiter::new(settings.rate_limit, services.rate_limits));
        let draining = settings.draining;
        // One set of change streams for all workers, so `CHANGES_MAX_STREAMS`
        // bounds the process (C14).
        let changes = web::Data::new(ChangeStreams::new(
            services.changes,
            settings.changes,
            draining.clone(),
        ));
        let request_log = settings.request_log;
        let tracer = settings.tracer;
        let send_timeout = settings.send_timeout;
        let server = actix_web::HttpServer::new(move || {
            // Built once per worker thread: its metric handles are its own.
            let edge_state = Rc::new(Edge {
                draining: draining.clone(),
                metrics: RequestMetrics::new(),
                limiter: Arc::clone(&limiter),
                request_log: Arc::clone(&request_log),
                tracer: tracer.clone(),
            });
            // One layer around the routes: connection fate, metrics, CORS,
            // the limiter, ETags, nosniff and the log line, in the order
            // `edge/layer.rs` explains.
            App::new()
                .app_data(items.clone())
                .app_data(changes.clone())
                .app_data(products.clone())
                .app_data(users.clone())
                .app_data(reads.clone())
                .app_data(uploads.clone())
                .app_data(spooling.clone())
                .app_data(body_limits)
                .configure(routes::configure)
                .default_service(web::to(routes::not_found))
                .wrap(EdgeLayer(edge_state))
        })
        .workers(settings.workers)
        // The streamed listing (C10) writes its body in several chunks; with
        // Nagle's algorithm the last small chunk waits for the client's
        // delayed ACK, 40 ms per response (measured: 1.1k req/s on 1,000
        // items, p50 44 ms). Responses are written whole or in large
        // chunks, so nothing is gained by coalescing.
        //
        // The send timeout (C12) is the kernel's `TCP_USER_TIMEOUT`: a
        // connection whose sent bytes stay unacknowledged that long, or
        // whose client keeps its window shut that long (it reads nothing:
        // Linux applies the timeout to zero-window probes too), is reset.
        // actix-http then drops the response, and with it whatever the
        // response held (a listing's spool). No timer, no per-request work:
        // one option per connection, and it also covers the bytes actix
        // buffered itself, which no response body sees.
        .on_connect(move |connection, _| {
            if let Some(tcp) = connection.downcast_ref::<actix_web::rt::net::TcpStream>() {
                let _ = tcp.set_nodelay(true);
                if let Err(error) =
                    socket2::SockRef::from(tcp).set_tcp_user_timeout(Some(send_timeout))
                {
                    tracing::warn!(%error, "SEND_TIMEOUT_MS could not be set on a connection");
                }
            }
        })
        .client_request_timeout(REQUEST_HEAD_TIMEOUT)
        .keep_alive(KEEP_ALIVE)
        .shutdown_timeout(SHUTDOWN_GRACE_SECS)
        .shutdown_signal(shutdown)
        .listen(listener)?
        .run();
        Ok(Self {
            server,
            port,
            front_door,
        })
    }

    /// The port actually bound (the one the OS chose when asked for port 0).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A handle that can stop the server from elsewhere (tests).
    pub fn handle(&self) -> HttpServerHandle {
        HttpServerHandle {
            server: self.server.handle(),
            front_door: Arc::clone(&self.front_door),
        }
    }

    /// Serves until shutdown completes.
    pub async fn run(self) -> std::io::Result<()> {
        self.server.await
    }
}
