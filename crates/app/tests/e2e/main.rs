//! End-to-end tests of the `items-service` binary as a process: its exit
//! statuses and messages (C1), and the whole item lifecycle over real HTTP.

#![allow(clippy::unwrap_used)]

mod helpers;

mod admin;
mod browser;
mod connections;
mod fleet;
mod lifecycle;
mod operator;
mod startup;
mod two_instances;
