//! Starting the service on port 0 and learning the ports it got: in this
//! process through the library ([`App`]), or the built binary as a process
//! ([`Service`]) for what only a process shows (signals, exit statuses,
//! `ulimit -n`, its log), which names its ports in its start-up line. No
//! test picks a port itself, so tests running at once never race for one.

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub use crate::support::Client;
use clap::CommandFactory;
use items_app::{Application, Config, Listening};
use tokio::sync::oneshot;

/// The binary under test, built by cargo for this test run.
pub fn binary() -> Command {
    without_settings(Command::new(env!("CARGO_BIN_EXE_items-service")))
}

/// The binary started by `sh` with at most `limit` open file descriptors
/// (`ulimit -n`), so a test can exhaust them without touching its own.
pub fn binary_with_fd_limit(limit: u32) -> Command {
    let mut command = Command::new("sh");
    command.args([
        "-c",
        &format!("ulimit -n {limit} && exec \"$0\""),
        env!("CARGO_BIN_EXE_items-service"),
    ]);
    without_settings(command)
}

/// The binary as an unprivileged user, as the shipped systemd unit runs it
/// (`DynamicUser=yes`, no capabilities): root starts it as `nobody` through
/// `setpriv` (util-linux); anyone else is unprivileged already.
#[allow(dead_code)] // used by some test modules only
pub fn binary_unprivileged() -> Command {
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|line| line.starts_with("Uid:") && line.split_whitespace().nth(1) == Some("0"));
    if !root {
        return binary();
    }
    let mut command = Command::new("setpriv");
    command.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        env!("CARGO_BIN_EXE_items-service"),
    ]);
    without_settings(command)
}

fn without_settings(mut command: Command) -> Command {
    // A clean environment for the settings of C1, so the caller's own PORT or
    // DATABASE_URL cannot leak into a test.
    for (variable, _) in every_setting() {
        command.env_remove(variable);
    }
    command.env_remove("RUST_LOG");
    // Nor the caller's OpenTelemetry settings (C11): a test that wants
    // traces names its endpoint.
    for (variable, _) in std::env::vars_os() {
        if variable.to_string_lossy().starts_with("OTEL_") {
            command.env_remove(variable);
        }
    }
    command
}

/// Every setting of C1 as its environment variable and its flag
/// (`RATE_LIMIT_MAX`, `--rate-limit-max`), as the service's own command line
/// declares them: a setting added there is known here.
fn every_setting() -> Vec<(String, String)> {
    Config::command()
        .get_arguments()
        .filter_map(|arg| {
            let variable = arg.get_env()?.to_str()?.to_owned();
            Some((variable, format!("--{}", arg.get_long()?)))
        })
        .collect()
}

/// Log settings under which the binary writes its start-up line (`info`,
/// target `items_service`) and warnings, without a line per request.
pub const START_UP_LINE_AND_WARNINGS: &str = "warn,items_service=info,items_service::request=warn";

/// Where the start-up line says the service listens, in the text log's
/// format or in JSON's (`LOG_FORMAT=json`).
fn listening_line(line: &str) -> Option<Listening> {
    if let Some(listening) = Listening::from_log_line(line) {
        return Some(listening);
    }
    let line: serde_json::Value = serde_json::from_str(line).ok()?;
    if line["message"] != "listening" || line["target"] != "items_service" {
        return None;
    }
    let address = |name: &str| line[name].as_str()?.parse().ok();
    Some(Listening {
        address: address("address")?,
        admin_address: address("admin_address"),
    })
}

/// A running service process; killed on drop if the test did not stop it.
pub struct Service {
    pub child: Child,
    /// Where it listens, as its start-up line says.
    pub listening: Listening,
    /// The kit's typed client of its public listener.
    pub client: Client,
    /// Holds `uploads/` and `service.log` (its stdout) for as long as the
    /// process that writes them.
    files: tempfile::TempDir,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Service {
    /// Starts the binary on loopback with `PORT=0` and these extra settings
    /// (`ADMIN_PORT=0` for an admin listener), and waits for its start-up
    /// line, which names the ports the system chose.
    pub async fn start(settings: &[(&str, &str)]) -> Self {
        Self::launch(binary(), settings).await
    }

    /// Like [`Service::start`], with `RUST_LOG` unset: the log an operator
    /// gets by default, request lines included.
    #[allow(dead_code)] // used by some test modules only
    pub async fn start_with_the_default_log(settings: &[(&str, &str)]) -> Self {
        let mut command = binary();
        command.env_remove("RUST_LOG");
        Self::launch_with_log_filter(command, None, settings).await
    }

    /// Like [`Service::start`], with `command` as the process to start.
    #[allow(dead_code)] // used by some test modules only
    pub async fn start_command(command: Command, settings: &[(&str, &str)]) -> Self {
        Self::launch(command, settings).await
    }

    async fn launch(command: Command, settings: &[(&str, &str)]) -> Self {
        Self::launch_with_log_filter(command, Some(START_UP_LINE_AND_WARNINGS), settings).await
    }

    async fn launch_with_log_filter(
        mut command: Command,
        log_filter: Option<&str>,
        settings: &[(&str, &str)],
    ) -> Self {
        let files = tempfile::tempdir().unwrap();
        let log = std::fs::File::create(files.path().join("service.log")).unwrap();
        if let Some(filter) = log_filter {
            command.env("RUST_LOG", filter);
        }
        command
            .env("HOST", "127.0.0.1")
            .env("PORT", "0")
            .env("UPLOADS_DIR", files.path().join("uploads"))
            .envs(settings.iter().copied())
            .stdout(log)
            .stderr(Stdio::piped());
        let mut child = command.spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let listening = loop {
            let log = std::fs::read_to_string(files.path().join("service.log")).unwrap();
            if let Some(listening) = log.lines().find_map(listening_line) {
                break listening;
            }
            if child.try_wait().unwrap().is_some() {
                let mut stderr = String::new();
                child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut stderr)
                    .unwrap();
                panic!("the service exited before it listened: {stderr}{log}");
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("no start-up line in 20 s: {log}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        Self {
            child,
            client: Client::at(listening.address.port()),
            listening,
            files,
        }
    }

    /// A client of its admin listener (started with `ADMIN_PORT`).
    #[allow(dead_code)] // used by some test modules only
    pub fn admin(&self) -> Client {
        let admin = self
            .listening
            .admin_address
            .expect("started with ADMIN_PORT");
        Client::at(admin.port())
    }

    /// What the service has logged so far (its stdout), once a line
    /// containing `expected` has arrived (the log is written by a background
    /// thread, so it may trail the service's first answers by a moment).
    #[allow(dead_code)] // used by some test modules only
    pub async fn log_once_it_contains(&self, expected: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let log = std::fs::read_to_string(self.files.path().join("service.log")).unwrap();
            if log.contains(expected) {
                return log;
            }
            assert!(
                Instant::now() < deadline,
                "no {expected:?} in the log: {log}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn url(&self, path: &str) -> String {
        self.client.url(path)
    }

    /// Its log (stdout) as written so far: `service.log`.
    #[allow(dead_code)] // used by some test modules only
    pub fn log_path(&self) -> std::path::PathBuf {
        self.files.path().join("service.log")
    }

    /// Its `UPLOADS_DIR`, unless the test set one of its own.
    #[allow(dead_code)] // used by some test modules only
    pub fn uploads_dir(&self) -> std::path::PathBuf {
        self.files.path().join("uploads")
    }

    /// Sends SIGTERM (by `kill`, so the tests need no unsafe code).
    pub fn terminate(&self) {
        let pid = self.child.id().to_string();
        let status = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(status.success());
    }

    /// Waits for the process to exit, at most `limit`.
    pub async fn wait(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the service did not exit in {limit:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Runs the binary to completion with these settings; returns its status and stderr.
pub fn run_to_exit(settings: &[(&str, &str)], args: &[&str]) -> (ExitStatus, String, String) {
    run_command_to_exit(binary(), settings, args)
}

/// [`run_to_exit`] with `command` as the process to run.
pub fn run_command_to_exit(
    mut command: Command,
    settings: &[(&str, &str)],
    args: &[&str],
) -> (ExitStatus, String, String) {
    let output = command
        .envs(settings.iter().copied())
        .args(args)
        .output()
        .unwrap();
    (
        output.status,
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The application built through the library in this process, on port 0
/// (and on port 0 for the admin listener with `("ADMIN_PORT", "0")`), over
/// its own uploads directory; stopped gracefully when dropped.
pub struct App {
    pub listening: Listening,
    /// The kit's typed client of its public listener.
    pub client: Client,
    stop: Option<oneshot::Sender<()>>,
    _uploads: tempfile::TempDir,
}

impl Drop for App {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl App {
    /// Builds and runs the application with these settings, named as their
    /// environment variables (`RATE_LIMIT_MAX`) and passed as their flags
    /// (`--rate-limit-max`, C1); the test's own environment is ignored.
    pub async fn start(settings: &[(&str, &str)]) -> Self {
        let uploads = tempfile::tempdir().unwrap();
        let mut flags = vec![
            "--host".into(),
            "127.0.0.1".into(),
            "--port".into(),
            "0".into(),
            "--uploads-dir".into(),
            uploads.path().join("uploads").into_os_string(),
        ];
        let known = every_setting();
        for (variable, value) in settings {
            let (_, flag) = known
                .iter()
                .find(|(known, _)| known == variable)
                .unwrap_or_else(|| panic!("{variable} is not a setting of the service"));
            flags.push(flag.into());
            flags.push(value.into());
        }
        let config = Config::from_flags(flags).unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let application = Application::build(&config, async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
        let listening = application.listening();
        tokio::spawn(application.run_until_stopped());
        Self {
            client: Client::at(listening.address.port()),
            listening,
            stop: Some(stop),
            _uploads: uploads,
        }
    }

    pub fn url(&self, path: &str) -> String {
        self.client.url(path)
    }
}
