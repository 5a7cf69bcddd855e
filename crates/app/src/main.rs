//! `items-service`: parses the configuration (C1), builds the application and
//! runs it until SIGINT or SIGTERM.

mod config;
mod metrics;
mod startup;
mod telemetry;

use std::process::ExitCode;

use config::{Config, Early};
use startup::Application;

fn main() -> ExitCode {
    let config = match Config::parse_from_env() {
        Ok(config) => config,
        Err(Early::Print(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Err(Early::Invalid(line)) => {
            eprintln!("{line}");
            return ExitCode::from(2);
        }
    };
    if let Some(config::Command::Openapi) = config.command {
        println!("{}", items_adapters::http::openapi::openapi_json());
        return ExitCode::SUCCESS;
    }
    let _log_writer = telemetry::init(config.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("items-service: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(config))
}

async fn run(config: Config) -> ExitCode {
    let application = match Application::build(&config, shutdown_signal()).await {
        Ok(application) => application,
        Err(error) => {
            eprintln!("items-service: {error}");
            return ExitCode::from(error.exit_code());
        }
    };
    tracing::info!(port = application.port(), "listening");
    match application.run_until_stopped().await {
        Ok(()) => {
            tracing::info!("stopped");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("items-service: the server failed: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Completes on SIGINT or SIGTERM. Both stop the server gracefully: it stops
/// accepting and gives requests in flight up to 30 s (C1).
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = interrupt => {}
                    _ = terminate.recv() => {}
                }
            }
            Err(_) => {
                let _ = interrupt.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
    tracing::info!("shutdown signal received; finishing requests in flight");
}
