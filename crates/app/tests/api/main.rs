//! One integration-test binary for the HTTP adapter: the tests start a real
//! server on port 0 and talk HTTP to it (besides: the OpenAPI document
//! against its committed copies, and the Redis rate-limit store's script
//! against the domain's GCRA). `unwrap` is fine here: a panic is a failed
//! test.

#![allow(clippy::unwrap_used)]

#[path = "../support/mod.rs"]
mod support;

mod admin;
mod auxiliary;
mod bodies;
mod changes;
mod compression;
mod consistency;
mod cors;
mod durable;
mod failures;
mod hardening;
mod http_semantics;
mod idempotency;
mod items;
mod listing;
mod openapi;
mod postgres;
mod products_and_users;
mod rate_limit;
mod rate_limit_redis;
mod reverse_proxy;
mod slow_clients;
mod sqlite;
mod stopping;
mod unread_bodies;
mod upload_faults;
mod uploads;
