//! `items-service`, the binary: parses the configuration (C1), installs
//! logging and the signal handlers, builds the application (`items_app`),
//! runs it until SIGINT or SIGTERM and turns every outcome into an exit
//! status; `items-service openapi` prints the OpenAPI document instead, and
//! `items-service copy` moves the data between stores (`items_app::copy`).

use std::io::Write;
use std::process::ExitCode;

use items_adapters::report::ErrorChain;
use items_app::config::{self, Config, Early};
use items_app::{Application, telemetry};

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
    if let Some(config::Command::Copy(args)) = &config.command {
        return items_app::copy::main(args);
    }
    let _log_writer = telemetry::init(config.server.log_format);
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

/// Builds, announces and serves; every error is one line on stderr with the
/// program's name in front, once (the errors themselves never carry it).
async fn run(config: Config) -> ExitCode {
    let application = match Application::build(&config, shutdown_signal()).await {
        Ok(application) => application,
        Err(error) => {
            eprintln!("items-service: {}", ErrorChain(&error));
            return ExitCode::from(error.exit_code());
        }
    };
    application
        .listening()
        .log(config.store.database_url.as_deref());
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
///
/// On Unix the handlers are installed when this is called, before the
/// listeners are bound, not when the future is first polled: a signal sent as soon as the
/// start-up line appears is a graceful stop too, never the default action
/// that kills the process.
fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let signals = {
        use tokio::signal::unix::{SignalKind, signal};
        (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        )
    };
    async move {
        #[cfg(unix)]
        match signals {
            (Ok(mut interrupt), Ok(mut terminate)) => {
                tokio::select! {
                    _ = interrupt.recv() => {}
                    _ = terminate.recv() => {}
                }
            }
            (Ok(mut one), Err(_)) | (Err(_), Ok(mut one)) => {
                one.recv().await;
            }
            // Neither handler installed: each signal keeps its default action.
            (Err(_), Err(_)) => std::future::pending().await,
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
        tracing::info!("shutdown signal received; finishing requests in flight");
    }
}
