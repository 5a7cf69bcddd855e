//! The defaults of the settings that concern this process alone (C1): where
//! it listens, how it logs, where it keeps uploads, how long it drains. No
//! adapter reads them. The limits a client is held to have their defaults in
//! `items_domain::defaults`, the PostgreSQL pool size in its adapter
//! (`items_adapters::postgres::DEFAULT_POOL_SIZE`); each is written once.

use std::net::{IpAddr, Ipv4Addr};

/// `PORT`: the TCP port.
pub const PORT: u16 = 3000;

/// `HOST`: every IPv4 interface.
pub const HOST: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);

/// `UPLOADS_DIR`: where uploads are stored, relative to the working directory.
pub const UPLOADS_DIR: &str = "uploads";

/// `UPLOADS_MAX_BYTES`: all stored uploads together, 10 GiB (C5).
pub const UPLOADS_MAX_BYTES: u64 = 10 * 1024 * 1024 * 1024;

/// `SHUTDOWN_DRAIN_MS`: how long `/readyz` answers 503 before the server
/// drains, with an admin listener (C11).
pub const SHUTDOWN_DRAIN_MS: u64 = 5000;

/// `LOG_FORMAT`: one human-readable line per request.
pub const LOG_FORMAT: &str = "text";
