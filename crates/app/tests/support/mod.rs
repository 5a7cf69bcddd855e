//! Fixtures of the application's tests, shared by the HTTP black-box tests
//! (`tests/api`) and the end-to-end tests (`tests/e2e`): the use cases over
//! chosen stores, a real server on port 0 over them, a typed client, and the
//! service's PostgreSQL store on a scratch database. They live here, beside
//! their tests, rather than in `items-testkit`: they build the service's own
//! adapters, and the kit depends on the domain alone, so no crate depends on
//! the adapters and is depended on by them.

// Each test binary uses a part of the fixtures.
#![allow(dead_code, unused_imports)]

pub mod http;
#[path = "../../../adapters/tests/support/scratch_store.rs"]
mod scratch_store;

pub use http::{
    Client, Ended, EventStream, FRAME_PATIENCE, Frame, TestApp, TestServices, assert_problem,
    assert_problem_of_type, header, test_settings,
};
pub use scratch_store::ScratchStore;
