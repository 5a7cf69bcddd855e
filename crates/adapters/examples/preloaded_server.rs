//! The real HTTP adapter over an in-memory store already holding N items,
//! for the scale benchmark (`python3 bench/run.py scale`): the items go in
//! through the `ItemRepository` port, not over HTTP, so ten million of them
//! take seconds instead of minutes.
//!
//! `preloaded_server N` binds 127.0.0.1 on port 0, prints `port P` on stdout
//! once it accepts connections (so a caller never races for a free port) and
//! serves until it is killed, with the rate limiter off and no request log.
//! Items are named `item-00000000000`, `item-00000000001`, … (16 bytes),
//! with ids 1..=N.

use std::io::Write;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Instant;

use items_adapters::disk::DiskUploadStore;
use items_adapters::http::{HttpServer, HttpSettings, RateLimitSettings, Services};
use items_adapters::memory::{self, InMemoryItemRepository, InMemoryRateLimitStore};
use items_domain::{ItemRepository, Name, RateLimiter, Repositories};

type Failure = Box<dyn std::error::Error>;

fn main() -> Result<(), Failure> {
    let count: u64 = match std::env::args().nth(1) {
        Some(count) => count.parse()?,
        None => return Err("usage: preloaded_server ITEMS".into()),
    };
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(serve(count))
}

async fn serve(count: u64) -> Result<(), Failure> {
    let items = Arc::new(InMemoryItemRepository::new());
    let started = Instant::now();
    for n in 0..count {
        items.create(Name::parse(&format!("item-{n:011}"))?).await?;
    }
    eprintln!(
        "loaded {count} items in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let uploads = tempfile::tempdir()?;
    let repositories = Repositories {
        items,
        ..memory::repositories()
    };
    let services = Services::new(
        repositories,
        Arc::new(DiskUploadStore::open(uploads.path())?),
        RateLimiter::local(Arc::new(InMemoryRateLimitStore::default())),
    );
    let defaults = HttpSettings::default();
    let settings = HttpSettings {
        rate_limit: RateLimitSettings {
            max: None,
            ..defaults.rate_limit
        },
        ..defaults
    };
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let server = HttpServer::bind(listener, settings, services, std::future::pending())?;
    // The listener is bound, so connections queue from here on.
    let mut stdout = std::io::stdout();
    writeln!(stdout, "port {}", server.port())?;
    stdout.flush()?;
    server.run().await?;
    Ok(())
}
