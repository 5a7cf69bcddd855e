//! The in-memory adapters pass the kit's contract checks, from a crate that
//! compiles nothing else of the service.

items_testkit::contract_tests!(repositories memory = items_adapters::memory::repositories());
