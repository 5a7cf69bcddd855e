//! Starting the built binary on a free port and stopping it.

use std::net::TcpListener;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

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

fn without_settings(mut command: Command) -> Command {
    // A clean environment for the settings of C1, so the caller's own PORT or
    // DATABASE_URL cannot leak into a test.
    for variable in [
        "PORT",
        "HOST",
        "DATABASE_URL",
        "UPLOADS_DIR",
        "RATE_LIMIT_MAX",
        "RATE_LIMIT_WINDOW_MS",
        "TRUST_PROXY",
        "REDIS_URL",
        "MAX_FILE_BYTES",
        "MAX_JSON_BYTES",
        "LOG_FORMAT",
        "SHUTDOWN_DRAIN_MS",
        "ADMIN_PORT",
        "DATABASE_POOL_SIZE",
        "RUST_LOG",
    ] {
        command.env_remove(variable);
    }
    command
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running service process; killed on drop if the test did not stop it.
pub struct Service {
    pub child: Child,
    pub base: String,
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
    /// Starts the binary on a free loopback port with these extra settings
    /// and waits until it answers.
    pub async fn start(settings: &[(&str, &str)]) -> Self {
        Self::launch(binary(), free_port(), settings).await
    }

    /// [`Service::start`] on this port (a restarted instance keeps its port).
    #[allow(dead_code)] // used by some test modules only
    pub async fn start_on(port: u16, settings: &[(&str, &str)]) -> Self {
        Self::launch(binary(), port, settings).await
    }

    /// Like [`Service::start`], with `command` as the process to start.
    #[allow(dead_code)] // used by some test modules only
    pub async fn start_command(command: Command, settings: &[(&str, &str)]) -> Self {
        Self::launch(command, free_port(), settings).await
    }

    async fn launch(mut command: Command, port: u16, settings: &[(&str, &str)]) -> Self {
        let files = tempfile::tempdir().unwrap();
        let log = std::fs::File::create(files.path().join("service.log")).unwrap();
        command
            .env("HOST", "127.0.0.1")
            .env("PORT", port.to_string())
            .env("UPLOADS_DIR", files.path().join("uploads"))
            .env("RUST_LOG", "warn")
            .envs(settings.iter().copied())
            .stdout(log)
            .stderr(Stdio::piped());
        let child = command.spawn().unwrap();
        let service = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            files,
        };
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while client
            .get(format!("{}/", service.base))
            .send()
            .await
            .is_err()
        {
            assert!(
                Instant::now() < deadline,
                "the service did not start answering"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        service
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
        format!("{}{path}", self.base)
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
    let output = binary()
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
