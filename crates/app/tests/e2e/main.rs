//! End-to-end tests of items-service: the application built through the
//! library in this process where that is enough, and the `items-service`
//! binary as a process for its signals, exit statuses, messages and log
//! (C1), its admin listener (C11), the item lifecycle over real HTTP, CORS
//! in a real browser (C8), a flood of idle connections, several instances on
//! one database, the durable SQLite file (C12), the fleet behind haproxy,
//! backup and restore by the documented commands, crash tests (SIGKILL
//! under write load, C12), the change feed's run (reconnecting subscribers
//! through a kill and a failover, C14), and traces sent to a receiver in
//! this process (C11). Every instance starts on port 0 and reports the
//! ports it got.

#![allow(clippy::unwrap_used)]

#[path = "../support/mod.rs"]
mod support;

mod helpers;

mod admin;
mod backup;
mod browser;
mod client_faults;
mod connections;
mod copy;
mod crash;
mod drain;
mod failover;
mod feed_run;
mod fleet;
mod library;
mod lifecycle;
mod lost_commits;
mod migrate;
mod operator;
mod restore;
mod sqlite;
mod standby_reads;
mod startup;
mod statement_budget;
mod traces;
mod two_instances;
mod unread_bodies;
mod uploads;
