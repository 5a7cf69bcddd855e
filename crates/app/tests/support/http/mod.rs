//! The service's HTTP edge under test: the use cases over
//! chosen stores ([`TestServices`]), a real server on port 0 over them
//! ([`TestApp`]), and a typed client for any running service ([`Client`]),
//! including a process an end-to-end test started, with a reader of its
//! change feed ([`EventStream`]).

mod app;
mod client;
mod events;
mod services;

pub use app::{TestApp, test_settings};
pub use client::{Client, assert_problem, assert_problem_of_type, header};
pub use events::{Ended, EventStream, FRAME_PATIENCE, Frame};
pub use services::TestServices;
