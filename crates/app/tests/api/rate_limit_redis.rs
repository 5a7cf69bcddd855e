//! The shared rate limit over Redis (C9): the Lua script decides as the
//! domain's GCRA does, instances sharing a Redis share one budget, and an
//! unreachable Redis leaves each instance on its own budget at once.
//!
//! These tests need the project's Redis on 127.0.0.1:6379 (and its
//! `redis-server`, for one Redis of their own on a Unix socket) and fail,
//! never skip, without it. Each uses a key prefix of its own.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use items_adapters::http::{HttpSettings, RateLimitSettings};
use items_adapters::memory::InMemoryRateLimitStore;
use items_adapters::redis::RedisRateLimitStore;
use items_domain::{Gcra, RateLimitStore, RateLimiter, Verdict};

use crate::support::*;

const REDIS: &str = "redis://127.0.0.1:6379/";

/// A prefix no other test run uses.
fn unique_prefix() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("items-service-test:{}:{nanos}:", std::process::id())
}

fn redis_store(url: &str, prefix: &str) -> Arc<RedisRateLimitStore> {
    Arc::new(RedisRateLimitStore::open(url, prefix).unwrap())
}

fn shared(redis: Arc<RedisRateLimitStore>) -> RateLimiter {
    RateLimiter::shared(redis, Arc::new(InMemoryRateLimitStore::default()))
}

async fn app_over(budgets: RateLimiter, max: u32) -> TestApp {
    let settings = HttpSettings {
        rate_limit: RateLimitSettings {
            max: NonZeroU32::new(max),
            window: Duration::from_secs(600),
            trust_proxy: 0,
        },
        ..test_settings()
    };
    TestApp::spawn_with(
        settings,
        TestServices::in_memory().with_rate_limits(budgets),
    )
    .await
}

/// Redis must answer: a missing one is a failure of the test environment,
/// reported as such rather than as a limiter bug.
async fn require_redis(store: &RedisRateLimitStore) {
    use items_domain::HealthCheck;
    store
        .ping()
        .await
        .expect("Redis must answer (the project's machines run it on 127.0.0.1:6379)");
}

/// A Redis of the test's own that listens only on a Unix socket in a
/// directory of its own (the machine's Redis listens on TCP only), stopped
/// when dropped. `redis-server` comes with the machine's Redis: a missing
/// one fails the test rather than skipping it.
struct UnixSocketRedis {
    server: std::process::Child,
    socket: std::path::PathBuf,
    _directory: tempfile::TempDir,
}

impl UnixSocketRedis {
    fn start() -> Self {
        let directory = tempfile::tempdir().unwrap();
        let socket = directory.path().join("redis.sock");
        let server = std::process::Command::new("redis-server")
            .args(["--port", "0", "--save", "", "--appendonly", "no"])
            .arg("--unixsocket")
            .arg(&socket)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server must be installed (apt-get install redis-server)");
        // Until it accepts: the socket's file appears at bind(), a moment
        // before listen(), and a connection in between is refused.
        let started = Instant::now();
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "redis-server accepted nothing on {} within 10 s",
                socket.display()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Self {
            server,
            socket,
            _directory: directory,
        }
    }

    fn url(&self) -> String {
        format!("redis+unix://{}", self.socket.display())
    }
}

impl Drop for UnixSocketRedis {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

#[tokio::test]
async fn the_redis_script_decides_as_the_in_process_gcra_does_c9() {
    let redis = redis_store(REDIS, &unique_prefix());
    require_redis(&redis).await;
    let local = InMemoryRateLimitStore::default();
    let gcra = Gcra::new(NonZeroU32::new(3).unwrap(), Duration::from_secs(60));
    let client = IpAddr::from([203, 0, 113, 9]);

    for request in 0..6 {
        let from_redis = redis.spend(client, gcra, Instant::now()).await.unwrap();
        let in_process = local.spend(client, gcra, Instant::now()).await.unwrap();
        assert_eq!(
            from_redis.allowed, in_process.allowed,
            "request {request}: allowed"
        );
        // The clocks differ (Redis's in µs, ours in ns) by the time between
        // the two calls: the budgets agree to within a few milliseconds.
        let apart = from_redis.until_full.abs_diff(in_process.until_full);
        assert!(
            apart < Duration::from_millis(100),
            "request {request}: {apart:?}"
        );
    }
}

#[tokio::test]
async fn two_instances_sharing_redis_give_a_client_one_budget_c9() {
    two_instances_give_a_client_one_budget(REDIS).await;
}

#[tokio::test]
async fn two_instances_sharing_a_redis_over_its_unix_socket_give_a_client_one_budget_c9() {
    let redis = UnixSocketRedis::start();
    two_instances_give_a_client_one_budget(&redis.url()).await;
}

/// Two instances on the Redis at `url`, a budget of 4, six requests from one
/// client alternating between them: one budget, counted in the headers
/// across both.
async fn two_instances_give_a_client_one_budget(url: &str) {
    let prefix = unique_prefix();
    let first_store = redis_store(url, &prefix);
    require_redis(&first_store).await;
    let first = app_over(shared(first_store), 4).await;
    let second = app_over(shared(redis_store(url, &prefix)), 4).await;

    let mut seen = Vec::new();
    for request in 0..6 {
        let app = if request % 2 == 0 { &first } else { &second };
        let response = app.get("/").await;
        let remaining = response
            .headers()
            .get("ratelimit-remaining")
            .map(|value| value.to_str().unwrap().to_owned());
        seen.push((response.status().as_u16(), remaining));
    }

    let expected: Vec<(u16, Option<String>)> = [
        (200, "3"),
        (200, "2"),
        (200, "1"),
        (200, "0"),
        (429, "0"),
        (429, "0"),
    ]
    .into_iter()
    .map(|(status, remaining)| (status, Some(remaining.to_owned())))
    .collect();
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn an_unreachable_redis_leaves_the_instance_on_its_own_budget_at_once_c9() {
    // Port 9 (discard) is closed on loopback: every connection is refused.
    let unreachable = redis_store("redis://127.0.0.1:9/", &unique_prefix());
    let app = app_over(shared(unreachable), 2).await;

    let started = Instant::now();
    let statuses = [
        app.get("/").await.status().as_u16(),
        app.get("/").await.status().as_u16(),
        app.get("/").await.status().as_u16(),
    ];

    assert_eq!(statuses, [200, 200, 429], "the local budget still limits");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "answered without waiting on Redis: {:?}",
        started.elapsed()
    );
}

/// Connects `store` and loads its script (on a key of its own), so what a
/// test measures next is the shared budget, not the first connection. The
/// first call connects within the store's 50 ms budget, which a loaded
/// machine may miss: it spends until Redis decides, for up to 5 s.
async fn warm_up(store: &RedisRateLimitStore) {
    let gcra = Gcra::new(NonZeroU32::MAX, Duration::from_secs(1));
    let warm_up = IpAddr::from([198, 51, 100, 1]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while store.spend(warm_up, gcra, Instant::now()).await.is_err() {
        assert!(Instant::now() < deadline, "Redis answers within 5 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `count` requests to `GET /` at once, spread over `apps` in turn; how many
/// each status got.
async fn concurrent_gets(apps: &[&TestApp], count: usize) -> (usize, usize) {
    let requests = (0..count).map(|n| apps[n % apps.len()].get("/"));
    let statuses: Vec<u16> = futures_util::future::join_all(requests)
        .await
        .iter()
        .map(|response| response.status().as_u16())
        .collect();
    let served = statuses.iter().filter(|&&status| status == 200).count();
    let refused = statuses.iter().filter(|&&status| status == 429).count();
    (served, refused)
}

#[tokio::test]
async fn a_budget_of_n_lets_exactly_n_of_200_concurrent_requests_through_c9() {
    // Decisions that queue while a script call is in flight go to Redis
    // together; one client's many decisions in one call are still taken
    // one by one against one budget.
    let mut trials = Vec::new();
    for _ in 0..TRIALS {
        let redis = redis_store(REDIS, &unique_prefix());
        require_redis(&redis).await;
        warm_up(&redis).await;
        let app = app_over(shared(redis), 7).await;
        trials.push(concurrent_gets(&[&app], 200).await);
        if trials.last() == Some(&(7, 193)) {
            return;
        }
    }
    panic!("no trial let exactly 7 of 200 through: {trials:?}");
}

/// Trials of a 200-request burst before an exact count is required to have
/// shown. A decision whose Redis call misses the 50 ms bound falls back to
/// the instance's own budget (C9), which may then let more through: on the
/// CI's 2 cores busy with the whole suite, one burst in several has seen
/// that happen. Counting wrong in every trial is a fault of the limiter.
const TRIALS: usize = 3;

#[tokio::test]
async fn two_instances_let_exactly_n_of_200_concurrent_requests_through_c9() {
    let mut trials = Vec::new();
    for _ in 0..TRIALS {
        let prefix = unique_prefix();
        let first_store = redis_store(REDIS, &prefix);
        require_redis(&first_store).await;
        let second_store = redis_store(REDIS, &prefix);
        warm_up(&first_store).await;
        warm_up(&second_store).await;
        let first = app_over(shared(first_store), 9).await;
        let second = app_over(shared(second_store), 9).await;
        trials.push(concurrent_gets(&[&first, &second], 200).await);
        if trials.last() == Some(&(9, 191)) {
            return;
        }
    }
    panic!("no trial let exactly 9 of 200 through two instances: {trials:?}");
}

#[tokio::test]
async fn a_stalled_redis_sends_every_queued_decision_to_the_local_budget_within_the_bound_c9() {
    let proxy = FreezingProxy::start().await;
    let redis = redis_store(
        &format!("redis://127.0.0.1:{}/", proxy.port),
        &unique_prefix(),
    );
    require_redis(&redis).await;
    let limiter = shared(Arc::clone(&redis));
    let gcra = Gcra::new(NonZeroU32::new(5).unwrap(), Duration::from_secs(600));
    let client = IpAddr::from([203, 0, 113, 10]);
    // Connected and the script loaded: what follows waits on a stall only.
    assert!(
        redis
            .spend(IpAddr::from([203, 0, 113, 11]), gcra, Instant::now())
            .await
            .is_ok()
    );

    proxy.freeze();
    let checks = (0..200).map(|_| async {
        let asked = Instant::now();
        let verdict = limiter.check(client, gcra, Instant::now()).await.unwrap();
        (verdict, asked.elapsed())
    });
    let decided = futures_util::future::join_all(checks).await;

    // Every decision was counted, in the local budget (5), none lost.
    let allowed = decided
        .iter()
        .filter(|(verdict, _)| matches!(verdict, Verdict::Allowed { .. }))
        .count();
    assert_eq!(allowed, 5);
    // Each waited at most the bound (50 ms) plus scheduling; generous for a
    // loaded machine, but far below what waiting in turn behind the stalled
    // call would cost (200 × 50 ms) or a Redis that never answers.
    let longest = decided.iter().map(|(_, waited)| *waited).max().unwrap();
    assert!(longest < Duration::from_secs(2), "waited {longest:?}");

    // Redis answers again: the store returns to it by itself.
    proxy.thaw();
    let back = Instant::now();
    while redis.spend(client, gcra, Instant::now()).await.is_err() {
        assert!(back.elapsed() < Duration::from_secs(10), "back on Redis");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A TCP proxy to the project's Redis that can hold every byte in both
/// directions (a Redis that stalls: connections stay open, nothing is
/// answered) and let them go again. Kept here, minimal, rather than in the
/// kit's `TcpProxy`, which cuts.
struct FreezingProxy {
    port: u16,
    frozen: tokio::sync::watch::Sender<bool>,
}

impl FreezingProxy {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (frozen, watch) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = tokio::net::TcpStream::connect("127.0.0.1:6379").await else {
                    continue;
                };
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::spawn(pump(client_read, server_write, watch.clone()));
                tokio::spawn(pump(server_read, client_write, watch.clone()));
            }
        });
        Self { port, frozen }
    }

    fn freeze(&self) {
        self.frozen.send_replace(true);
    }

    fn thaw(&self) {
        self.frozen.send_replace(false);
    }
}

/// Forwards `from` to `to`, holding what it read while the proxy is frozen.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut frozen: tokio::sync::watch::Receiver<bool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buffer = vec![0; 64 * 1024];
    loop {
        let Ok(read @ 1..) = from.read(&mut buffer).await else {
            return;
        };
        if frozen.wait_for(|frozen| !frozen).await.is_err() {
            return;
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}
