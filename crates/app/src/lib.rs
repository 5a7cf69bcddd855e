//! items-service as a library: read the configuration ([`Config`], C1),
//! build the application on it ([`Application::build`]: the adapters chosen
//! and wired, the listeners bound) and run it until its shutdown future
//! completes. The `items-service` binary is a thin `main` over this crate;
//! tests and embedders start the same [`Application`], on port 0 if they
//! like, and ask it where it listens ([`Application::listening`]).
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use items_app::{Application, Config};
//!
//! let config = Config::from_flags(["--host", "127.0.0.1", "--port", "0"])?;
//! let application = Application::build(&config, std::future::pending()).await?;
//! println!("serving on port {}", application.port());
//! application.run_until_stopped().await?;
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

pub mod backup;
pub mod config;
pub mod copy;
pub mod defaults;
pub mod listening;
mod metrics;
pub mod migrate;
mod start_error;
pub mod startup;
mod store;
pub mod telemetry;

pub use config::Config;
pub use listening::Listening;
pub use start_error::StartError;
pub use startup::Application;
