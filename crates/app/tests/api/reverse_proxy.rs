//! `TRUST_PROXY` behind a real reverse proxy (C1, C9): haproxy from Debian's
//! packages, started here on loopback, appends the peer it saw to
//! `X-Forwarded-For`; whatever the client wrote further left is ignored.
//! haproxy missing is a failure, never a skip: `scripts/install-test-deps.sh`
//! installs it.

use std::net::{Ipv4Addr, TcpListener};
use std::num::NonZeroU32;
use std::os::fd::OwnedFd;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use items_adapters::http::{HttpSettings, RateLimitSettings};
use reqwest::Method;

use crate::support::*;

/// A haproxy process in the foreground, killed when dropped.
struct Haproxy {
    child: Child,
    port: u16,
    _config: tempfile::TempDir,
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// haproxy in front of `backend_port`, appending `X-Forwarded-For`
/// (`option forwardfor`) as a production proxy would. Its front socket is
/// bound here, on a port the OS chose, and handed over as haproxy's stdin
/// (`bind fd@0`): no port is picked and then hoped to be still free.
/// Connections wait in the socket's backlog until haproxy accepts them.
fn start_haproxy(backend_port: u16) -> Haproxy {
    let front = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = front.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("haproxy.cfg");
    std::fs::write(
        &config,
        format!(
            "defaults\n  mode http\n  timeout connect 2s\n  timeout client 10s\n  timeout server 10s\n\
             frontend public\n  bind fd@0\n  option forwardfor\n  default_backend service\n\
             backend service\n  server app 127.0.0.1:{backend_port}\n"
        ),
    )
    .unwrap();
    let child = Command::new("haproxy")
        .arg("-db")
        .arg("-f")
        .arg(&config)
        .stdin(OwnedFd::from(front))
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|error| {
            panic!("haproxy could not start ({error}): run scripts/install-test-deps.sh")
        });
    Haproxy {
        child,
        port,
        _config: dir,
    }
}

#[tokio::test]
async fn behind_haproxy_with_trust_proxy_1_forged_forwarded_entries_meet_one_budget_c1_c9() {
    let settings = HttpSettings {
        rate_limit: RateLimitSettings {
            max: NonZeroU32::new(3),
            window: Duration::from_secs(60),
            trust_proxy: 1,
        },
        ..test_settings()
    };
    let app = TestApp::spawn_with(settings, TestServices::in_memory()).await;
    let proxy = start_haproxy(app.port);

    let mut statuses = Vec::new();
    for i in 1..=6 {
        let response = app
            .http
            .request(Method::GET, format!("http://127.0.0.1:{}/", proxy.port))
            .header("x-forwarded-for", format!("10.0.0.{i}, 198.51.100.{i}"))
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }

    assert_eq!(statuses, [200, 200, 200, 429, 429, 429]);
}
