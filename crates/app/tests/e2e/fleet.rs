//! The fleet (C1, C11): three instances of the binary on one
//! PostgreSQL database, behind haproxy from Debian's packages (round robin,
//! `option httpchk GET /readyz` on each admin port, `option forwardfor`),
//! the instances with `TRUST_PROXY=1`, all on loopback and all started and
//! stopped here. It shows that the instances behave as one service, and that
//! a rolling restart under steady load loses no request.
//!
//! haproxy is told not to retry on another instance: zero loss must come from
//! the service's own shutdown (readiness 503 first, then `SHUTDOWN_DRAIN_MS`
//! of serving, then the graceful stop). Measured with `SHUTDOWN_DRAIN_MS=0`
//! instead: 174 of 1646 requests got haproxy's 503; with 2500 ms: 0 of 5709.
//!
//! The haproxy configuration is the one `docs/operations.md` recommends,
//! with the ports the system chose: every instance starts on port 0 and
//! names its ports in its start-up line; haproxy's front end listens on a
//! socket the test bound on port 0 and hands over; the test reads haproxy's
//! view and re-points a restarted instance through haproxy's runtime API on
//! a Unix socket. No port is picked free and bound later, so nothing else
//! can take one in between.
//! haproxy must be installed (`scripts/install-test-deps.sh`, run by
//! `scripts/test.sh`, installs it) and Redis must answer on 127.0.0.1:6379;
//! without either the test fails and names what to install or start, it is
//! never skipped.

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use items_app::Listening;
use items_testkit::postgres::{ScratchDatabase, test_database_url};
use items_testkit::tcp_proxy::TcpProxy;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};

use crate::helpers::*;

/// haproxy checks each instance's `/readyz` this often, and takes it out
/// after one failed check.
const CHECK_INTERVAL: &str = "1s";
/// How long an instance keeps serving after SIGTERM with `/readyz` at 503:
/// more than one check interval plus the check itself, so haproxy has
/// stopped sending before the instance stops accepting.
const DRAIN_MS: &str = "2500";
const INSTANCES: usize = 3;
/// How long an instance takes to use Redis again once it answers.
const RETURN_TO_REDIS: Duration = Duration::from_secs(3);

/// haproxy's configuration for the fleet: the recipe of `docs/operations.md`
/// with the instances' own ports, the front end on the listening socket
/// haproxy gets as its standard input (`fd@0`), and the runtime API, not a
/// stats port, on the Unix socket `runtime_api`.
fn haproxy_config(runtime_api: &Path, instances: &[Listening]) -> String {
    let servers: String = instances
        .iter()
        .enumerate()
        .map(|(n, listening)| {
            format!(
                "    server items{n} {} check port {}\n",
                listening.address,
                admin_port(listening)
            )
        })
        .collect();
    let runtime_api = runtime_api.display();
    format!(
        "global
    maxconn 1000
    stats socket {runtime_api} level admin

defaults
    mode http
    timeout connect 1s
    timeout client 30s
    timeout server 30s
    timeout check 1s
    # No retry on another instance: the service's own drain (readiness
    # 503, then serving on for SHUTDOWN_DRAIN_MS) must lose nothing alone.
    retries 0

frontend public
    bind fd@0
    default_backend items

backend items
    balance roundrobin
    option forwardfor
    option httpchk GET /readyz
    http-check expect status 200
    default-server inter {CHECK_INTERVAL} fall 1 rise 1
{servers}"
    )
}

fn admin_port(listening: &Listening) -> u16 {
    listening
        .admin_address
        .expect("instances start with an admin listener")
        .port()
}

/// Where haproxy is installed; a missing haproxy fails the test, naming the
/// package, since a skipped fleet test would look like a passed one.
fn haproxy() -> String {
    let found = [
        "/usr/sbin/haproxy",
        "/usr/bin/haproxy",
        "/usr/local/sbin/haproxy",
    ]
    .into_iter()
    .find(|path| std::path::Path::new(path).exists());
    found
        .expect(
            "haproxy is not installed: the fleet test needs it \
             (`bash scripts/install-test-deps.sh` or `apt-get install haproxy`)",
        )
        .to_owned()
}

/// Three instances, haproxy in front, and the settings to restart them with.
struct Fleet {
    instances: Vec<Option<Service>>,
    settings: Vec<(String, String)>,
    haproxy: Child,
    front: String,
    runtime_api: PathBuf,
    client: reqwest::Client,
    _config: tempfile::TempDir,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        let _ = self.haproxy.kill();
        let _ = self.haproxy.wait();
    }
}

impl Fleet {
    async fn start(haproxy: &str, settings: &[(&str, &str)]) -> Self {
        let settings: Vec<(String, String)> = settings
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        let mut instances = Vec::new();
        for _ in 0..INSTANCES {
            instances.push(start_instance(&settings).await);
        }
        let config = tempfile::tempdir().unwrap();
        let path = config.path().join("haproxy.cfg");
        let runtime_api = config.path().join("runtime-api.sock");
        let listening: Vec<Listening> = instances.iter().map(|service| service.listening).collect();
        std::fs::write(&path, haproxy_config(&runtime_api, &listening)).unwrap();
        // The front end's socket is bound here, on port 0, and stays bound:
        // haproxy inherits it as its standard input (the one descriptor
        // `Command` passes on without unsafe code) and serves on it.
        let front = TcpListener::bind("127.0.0.1:0").unwrap();
        let front_address = front.local_addr().unwrap();
        let haproxy = Command::new(haproxy)
            .arg("-db")
            .arg("-f")
            .arg(&path)
            .stdin(Stdio::from(OwnedFd::from(front)))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let fleet = Self {
            instances: instances.into_iter().map(Some).collect(),
            settings,
            haproxy,
            front: format!("http://{front_address}"),
            runtime_api,
            client: reqwest::Client::new(),
            _config: config,
        };
        for n in 0..INSTANCES {
            fleet.wait_until_balanced(n, "UP").await;
        }
        fleet
    }

    /// A URL on instance `n` directly, bypassing haproxy.
    fn instance_url(&self, n: usize, path: &str) -> String {
        self.instances[n]
            .as_ref()
            .expect("instance n runs")
            .url(path)
    }

    /// One command on haproxy's runtime API, and its answer.
    async fn runtime_api(&self, command: &str) -> std::io::Result<String> {
        let mut stream = UnixStream::connect(&self.runtime_api).await?;
        stream.write_all(format!("{command}\n").as_bytes()).await?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await?;
        Ok(answer)
    }

    fn front_url(&self, path: &str) -> String {
        format!("{}{path}", self.front)
    }

    /// haproxy's view of instance `n`: `UP`, `DOWN`, … (its stats CSV).
    async fn balancer_status(&self, n: usize) -> String {
        let Ok(csv) = self.runtime_api("show stat").await else {
            return "no haproxy".into();
        };
        let mut lines = csv.lines();
        let header: Vec<&str> = lines
            .next()
            .unwrap_or_default()
            .trim_start_matches("# ")
            .split(',')
            .collect();
        let column = |name| header.iter().position(|field| *field == name);
        let (Some(server), Some(status)) = (column("svname"), column("status")) else {
            return "no stats".into();
        };
        let name = format!("items{n}");
        lines
            .map(|line| line.split(',').collect::<Vec<_>>())
            .find(|fields| fields.get(server) == Some(&name.as_str()))
            .and_then(|fields| fields.get(status).map(|status| (*status).to_owned()))
            .unwrap_or_default()
    }

    /// Waits until haproxy reports instance `n` as `wanted`.
    async fn wait_until_balanced(&self, n: usize, wanted: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let status = self.balancer_status(n).await;
            if status.starts_with(wanted) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "haproxy sees items{n} as {status:?}, not {wanted}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGTERM to instance `n`, wait for it to exit 0, start it again (on
    /// new ports), point haproxy's server `items{n}` at them, wait until
    /// haproxy sends to it again.
    async fn restart(&mut self, n: usize) -> Duration {
        let started = Instant::now();
        let mut instance = self.instances[n].take().unwrap();
        instance.terminate();
        let status = instance.wait(Duration::from_secs(40)).await;
        assert!(status.success(), "items{n} exited with {status:?}");
        drop(instance);
        let instance = start_instance(&self.settings).await;
        let port = instance.listening.address.port();
        let moved = self
            .runtime_api(&format!(
                "set server items/items{n} addr 127.0.0.1 port {port}"
            ))
            .await
            .unwrap();
        assert!(moved.contains(&format!("to '{port}'")), "{moved}");
        let checked = self
            .runtime_api(&format!(
                "set server items/items{n} check-port {}",
                admin_port(&instance.listening)
            ))
            .await
            .unwrap();
        assert_eq!(checked.trim(), "", "{checked}");
        self.instances[n] = Some(instance);
        self.wait_until_balanced(n, "UP").await;
        started.elapsed()
    }
}

async fn start_instance(settings: &[(String, String)]) -> Service {
    let mut all: Vec<(&str, &str)> = vec![
        ("ADMIN_PORT", "0"),
        ("TRUST_PROXY", "1"),
        ("SHUTDOWN_DRAIN_MS", DRAIN_MS),
    ];
    all.extend(
        settings
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str())),
    );
    Service::start(&all).await
}

async fn json_of(response: reqwest::Response) -> Value {
    response.json().await.unwrap()
}

fn etag(response: &reqwest::Response) -> String {
    response.headers()["etag"].to_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_fleet_behind_haproxy_is_one_service_and_a_rolling_restart_loses_no_request_c1_c11() {
    let haproxy = haproxy();
    let url = test_database_url();
    let database = ScratchDatabase::create(&url).await.unwrap();
    let database_url = database.url();
    let mut fleet = Fleet::start(
        &haproxy,
        &[
            ("DATABASE_URL", database_url.as_str()),
            ("RATE_LIMIT_MAX", "0"),
        ],
    )
    .await;

    writes_through_one_instance_are_read_through_the_others(&fleet).await;
    a_rolling_restart_under_load_answers_every_request(&mut fleet).await;

    drop(fleet);
    database.drop().await;
}

/// (a) ids, ETags and `If-Match` mean the same on every instance.
async fn writes_through_one_instance_are_read_through_the_others(fleet: &Fleet) {
    let client = &fleet.client;
    let created = client
        .post(fleet.instance_url(0, "/items"))
        .json(&json!({ "name": "shared" }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let created = json_of(created).await;
    let path = format!("/items/{}", created["id"]);

    let on_second = client
        .get(fleet.instance_url(1, &path))
        .send()
        .await
        .unwrap();
    assert_eq!(on_second.status(), 200);
    let tag = etag(&on_second);
    assert_eq!(json_of(on_second).await, created);
    let on_third = client
        .get(fleet.instance_url(2, &path))
        .send()
        .await
        .unwrap();
    assert_eq!(etag(&on_third), tag, "one item, one ETag on every instance");
    let not_modified = client
        .get(fleet.instance_url(0, &path))
        .header("if-none-match", &tag)
        .send()
        .await
        .unwrap();
    assert_eq!(not_modified.status(), 304);

    // A conditional write on the third with the second's ETag succeeds…
    let replaced = client
        .put(fleet.instance_url(2, &path))
        .header("if-match", &tag)
        .json(&json!({ "name": "renamed" }))
        .send()
        .await
        .unwrap();
    assert_eq!(replaced.status(), 200);
    let read = client
        .get(fleet.instance_url(1, &path))
        .send()
        .await
        .unwrap();
    let new_tag = etag(&read);
    assert_ne!(new_tag, tag, "the second sees the third's write");
    assert_eq!(json_of(read).await["name"], "renamed");
    // …and the same stale ETag is refused on the first.
    let stale = client
        .put(fleet.instance_url(0, &path))
        .header("if-match", &tag)
        .json(&json!({ "name": "lost update" }))
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status(), 412);
    let read = client
        .get(fleet.instance_url(1, &path))
        .send()
        .await
        .unwrap();
    assert_eq!(etag(&read), new_tag);
    assert_eq!(json_of(read).await["name"], "renamed");

    // Through the balancer (round robin over all three): distinct ids, each
    // readable at once by the next request, which another instance serves.
    let mut ids = std::collections::HashSet::new();
    for n in 0..9 {
        let created = client
            .post(fleet.front_url("/items"))
            .json(&json!({ "name": format!("via balancer {n}") }))
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), 201);
        let created = json_of(created).await;
        assert!(ids.insert(created["id"].as_i64().unwrap()));
        let read = client
            .get(fleet.front_url(&format!("/items/{}", created["id"])))
            .send()
            .await
            .unwrap();
        assert_eq!(json_of(read).await, created);
    }
}

/// (b) Each instance in turn: SIGTERM, wait for exit, start again, wait
/// until haproxy sends to it. Meanwhile clients send steadily through
/// haproxy: every request gets a 2xx.
async fn a_rolling_restart_under_load_answers_every_request(fleet: &mut Fleet) {
    let item = json_of(
        fleet
            .client
            .post(fleet.front_url("/items"))
            .json(&json!({ "name": "steady" }))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let read_path = fleet.front_url(&format!("/items/{}", item["id"]));
    let write_path = fleet.front_url("/items");
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..4)
        .map(|n| {
            let stop = Arc::clone(&stop);
            let (read_path, write_path) = (read_path.clone(), write_path.clone());
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                let mut answers: Vec<u16> = Vec::new();
                let deadline = Instant::now() + Duration::from_secs(90);
                let mut sent = 0_u32;
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    sent += 1;
                    // Mostly reads, one write in ten.
                    let request = if sent.is_multiple_of(10) {
                        client
                            .post(&write_path)
                            .json(&json!({ "name": format!("load {n}.{sent}") }))
                    } else {
                        client.get(&read_path)
                    };
                    let status = match request.timeout(Duration::from_secs(10)).send().await {
                        Ok(response) => response.status().as_u16(),
                        Err(_) => 0,
                    };
                    answers.push(status);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                answers
            })
        })
        .collect();

    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut took = Vec::new();
    for n in 0..INSTANCES {
        took.push(fleet.restart(n).await);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);

    let mut answers = Vec::new();
    for client in clients {
        answers.extend(client.await.unwrap());
    }
    let failed: Vec<u16> = answers
        .iter()
        .copied()
        .filter(|status| !(200..300).contains(status))
        .collect();
    eprintln!(
        "rolling restart: {} requests sent, {} not answered 2xx; restarts took {took:?}",
        answers.len(),
        failed.len()
    );
    assert!(
        answers.len() > 100,
        "the load was not steady: {}",
        answers.len()
    );
    assert!(failed.is_empty(), "lost or failed requests: {failed:?}");
}

/// Redis at 127.0.0.1:6379; one that does not answer fails the test, naming
/// how to start it, since a skipped fleet test would look like a passed one.
async fn redis() -> SocketAddr {
    let address = SocketAddr::from(([127, 0, 0, 1], 6379));
    let answers = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(address))
        .await
        .is_ok_and(|connected| connected.is_ok());
    assert!(
        answers,
        "Redis does not answer on 127.0.0.1:6379: the fleet's rate-limit test needs it \
         (`apt-get install redis-server`, then \
         `redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save '' --appendonly no`)"
    );
    address
}

/// A client whose connections come from a loopback address of its own
/// (127.a.b.c, random): haproxy appends it to `X-Forwarded-For`, so its
/// rate-limit key is unique to this run, whatever else uses the same Redis.
fn client_from_own_address() -> (reqwest::Client, IpAddr) {
    // std's hasher keys are random per process: enough randomness here.
    let random = std::hash::BuildHasher::hash_one(&std::hash::RandomState::new(), 0_u8);
    let [a, b, c, ..] = random.to_le_bytes();
    let address = IpAddr::from([127, a, b, c.max(2)]);
    let client = reqwest::Client::builder()
        .local_address(address)
        .build()
        .unwrap();
    (client, address)
}

/// Sends `count` `GET /` through the balancer, each with an
/// `X-Forwarded-For` the client wrote itself (a different address every
/// time, which must not buy it a new budget); the statuses, in order.
async fn send_through(fleet: &Fleet, client: &reqwest::Client, count: u32) -> Vec<u16> {
    let mut statuses = Vec::new();
    for n in 0..count {
        let started = Instant::now();
        let response = client
            .get(fleet.front_url("/"))
            .header("x-forwarded-for", format!("198.51.100.{}", n % 250))
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "a request waited {:?}",
            started.elapsed()
        );
        statuses.push(response.status().as_u16());
    }
    statuses
}

fn count(statuses: &[u16], status: u16) -> usize {
    statuses.iter().filter(|&&seen| seen == status).count()
}

#[tokio::test]
async fn one_client_gets_rate_limit_max_across_the_fleet_and_is_still_answered_without_redis_c9() {
    let haproxy = haproxy();
    let url = test_database_url();
    let redis = redis().await;
    let proxy = TcpProxy::start(redis).await;
    let database = ScratchDatabase::create(&url).await.unwrap();
    let database_url = database.url();
    let redis_url = format!("redis://127.0.0.1:{}/", proxy.port());
    // 30 per 10 minutes: one request's worth refills every 20 s, far longer
    // than each step below takes.
    let fleet = Fleet::start(
        &haproxy,
        &[
            ("DATABASE_URL", database_url.as_str()),
            ("REDIS_URL", redis_url.as_str()),
            ("RATE_LIMIT_MAX", "30"),
            ("RATE_LIMIT_WINDOW_MS", "600000"),
        ],
    )
    .await;
    let (client, address) = client_from_own_address();

    // (c) Round robin spreads 90 requests over three instances; one budget.
    let statuses = send_through(&fleet, &client, 90).await;
    assert_eq!(
        (count(&statuses, 200), count(&statuses, 429)),
        (30, 60),
        "client {address}: {statuses:?}"
    );
    assert!(statuses[..30].iter().all(|&status| status == 200));

    // (d) Redis unreachable: every request is still answered, at once, each
    // instance on a budget of its own (fresh: 20 requests each, all 200,
    // although the shared budget is spent).
    proxy.set_cut(true);
    let statuses = send_through(&fleet, &client, 60).await;
    assert_eq!(count(&statuses, 200), 60, "{statuses:?}");

    // Redis back: the instances return to the shared budget, which is
    // spent, while their own budgets still had 10 each.
    proxy.set_cut(false);
    tokio::time::sleep(RETURN_TO_REDIS).await;
    let statuses = send_through(&fleet, &client, 6).await;
    assert_eq!(count(&statuses, 429), 6, "{statuses:?}");

    drop(fleet);
    database.drop().await;
}
