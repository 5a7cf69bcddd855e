//! End-to-end tests of items-service: the application built through the
//! library in this process where that is enough, and the `items-service`
//! binary as a process for its signals, exit statuses, messages and log
//! (C1), the item lifecycle over real HTTP, and the fleet. Every instance
//! starts on port 0 and reports the ports it got.

#![allow(clippy::unwrap_used)]

mod helpers;

mod admin;
mod browser;
mod connections;
mod fleet;
mod library;
mod lifecycle;
mod operator;
mod startup;
mod two_instances;
