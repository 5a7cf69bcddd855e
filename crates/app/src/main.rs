//! `items-service`, the binary: parses the configuration (C1), installs
//! logging and the signal handlers, builds the application (`items_app`),
//! runs it until SIGINT or SIGTERM and turns every outcome into an exit
//! status; `items-service openapi` prints the OpenAPI document instead,
//! `items-service migrate` brings the database's schema up to date,
//! `items-service backup DEST` copies the SQLite store and
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
    match config.command {
        Some(config::Command::Openapi) => print_openapi(),
        // No logging installed: what `migrate` has to say is its one line.
        Some(config::Command::Migrate) => on_runtime(migrate(config)),
        // Likewise for `backup`: its one line is all it says.
        Some(config::Command::Backup { ref dest }) => on_runtime(backup(&config, dest)),
        // And for `copy`: progress on stderr, the counts on stdout.
        Some(config::Command::Copy(ref args)) => items_app::copy::main(args),
        None => serve(config),
    }
}

/// Serves until stopped: the runtime first, logging and traces installed
/// inside it (the gRPC exporter's channel runs on it), and shut down while
/// it still runs, the last spans sent, then the last log lines written.
fn serve(config: Config) -> ExitCode {
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
    let telemetry = {
        let _inside = runtime.enter();
        telemetry::init(config.server.log_format)
    };
    let telemetry = match telemetry {
        Ok(telemetry) => telemetry,
        Err(line) => {
            eprintln!("items-service: {line}");
            return ExitCode::from(2);
        }
    };
    let status = runtime.block_on(run(config));
    drop(telemetry);
    status
}

/// Runs `work` to completion on a multi-threaded Tokio runtime.
fn on_runtime(work: impl Future<Output = ExitCode>) -> ExitCode {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(work),
        Err(error) => {
            eprintln!("items-service: cannot start the async runtime: {error}");
            ExitCode::FAILURE
        }
    }
}

/// `items-service migrate`: one line, on stdout when the schema is up to
/// date (exit 0), else on stderr with the reason (exit 1; 2 for a setting).
async fn migrate(config: Config) -> ExitCode {
    match items_app::migrate::migrate(&config.store).await {
        Ok(done) => print_to_stdout(&format!("items-service: {done}\n")),
        Err(error) => {
            eprintln!("items-service: {}", ErrorChain(&error));
            ExitCode::from(error.exit_code())
        }
    }
}

/// `items-service backup DEST` (C12): one line on stdout when the copy is
/// written, one on stderr when it is not.
async fn backup(config: &Config, destination: &std::path::Path) -> ExitCode {
    match items_app::backup::run(&config.store, destination).await {
        Ok(done) => print_to_stdout(&format!("{done}\n")),
        Err(error) => {
            eprintln!("items-service: {}", ErrorChain(&error));
            ExitCode::from(error.exit_code())
        }
    }
}

/// `items-service openapi`: the document on stdout (C1).
fn print_openapi() -> ExitCode {
    // The document ends in its newline: the bytes `/openapi.json` serves.
    print_to_stdout(&items_adapters::http::openapi::openapi_json())
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
    application.listening().log(config.store.database());
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
