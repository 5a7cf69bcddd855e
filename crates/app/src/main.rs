//! `items-service`: parses the configuration (C1), builds the application and
//! runs it until SIGINT or SIGTERM.

mod config;
mod metrics;
mod startup;
mod telemetry;

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;

use config::{Config, Early};
use items_adapters::report::ErrorChain;
use startup::Application;

fn main() -> ExitCode {
    // `openapi` uses no server setting, so it is answered before they are
    // read: a `PORT=abc` left in the environment must not stop it.
    if std::env::args_os().skip(1).eq(["openapi"]) {
        return print_openapi();
    }
    let config = match Config::parse_from_env() {
        Ok(config) => config,
        Err(Early::Print(text)) => return print_to_stdout(&text),
        Err(Early::Invalid(line)) => {
            eprintln!("{line}");
            return ExitCode::from(2);
        }
    };
    if let Some(config::Command::Openapi) = config.command {
        return print_openapi();
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

/// `items-service openapi`: the document on stdout (C1).
fn print_openapi() -> ExitCode {
    print_to_stdout(&format!(
        "{}\n",
        items_adapters::http::openapi::openapi_json()
    ))
}

/// Writes `text` to stdout. A reader that went away (`items-service openapi
/// | head`) ends the command quietly with status 0, as it would any Unix
/// filter, where `print!` would panic (C1: never a panic).
fn print_to_stdout(text: &str) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("items-service: cannot write to stdout: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(config: Config) -> ExitCode {
    let application = match Application::build(&config, shutdown_signal()).await {
        Ok(application) => application,
        Err(error) => {
            eprintln!("items-service: {}", ErrorChain(&error));
            return ExitCode::from(error.exit_code());
        }
    };
    tracing::info!(
        address = %SocketAddr::new(config.host, application.port()),
        store = %store_description(config.database_url.as_deref()),
        "listening"
    );
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

/// Where the data lives, for the start-up line: `memory`, or `PostgreSQL`
/// and the URL with its password hidden.
fn store_description(database_url: Option<&str>) -> String {
    match database_url {
        None => "memory".to_owned(),
        Some(url) => format!("PostgreSQL {}", without_password(url)),
    }
}

/// `postgres://user:secret@host/db` → `postgres://user:***@host/db`; a URL
/// without a password is returned as it is.
fn without_password(url: &str) -> String {
    let authority_start = url.find("://").map_or(0, |at| at + 3);
    let authority_end = url[authority_start..]
        .find(['/', '?'])
        .map_or(url.len(), |at| authority_start + at);
    let authority = &url[authority_start..authority_end];
    let Some((user_info, host)) = authority.rsplit_once('@') else {
        return url.to_owned();
    };
    let Some((user, _password)) = user_info.split_once(':') else {
        return url.to_owned();
    };
    format!(
        "{}{user}:***@{host}{}",
        &url[..authority_start],
        &url[authority_end..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_up_line_names_the_store_and_hides_the_password() {
        assert_eq!(store_description(None), "memory");
        assert_eq!(
            store_description(Some(
                "postgres://app:s3cr:et@db.internal:5432/items?sslmode=require"
            )),
            "PostgreSQL postgres://app:***@db.internal:5432/items?sslmode=require"
        );
        assert_eq!(
            store_description(Some("postgres://postgres@127.0.0.1:5432/items")),
            "PostgreSQL postgres://postgres@127.0.0.1:5432/items"
        );
        assert_eq!(
            without_password("postgresql://u:p@h"),
            "postgresql://u:***@h"
        );
    }
}
