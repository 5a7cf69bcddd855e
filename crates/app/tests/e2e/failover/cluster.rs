//! Two PostgreSQL 15 servers of the test's own, a primary and a streaming
//! standby (and any further standbys a test adds), made with Debian's binaries under a temporary directory: the
//! machine's own server (5432) is left alone. As root, every PostgreSQL
//! binary runs as the `postgres` user (`setpriv`), which owns the
//! directory: `initdb` refuses to run as root.
//!
//! Each server listens on a loopback port the system chose and keeps its
//! Unix socket in the temporary directory. The pair stops both servers
//! (`immediate`) and removes everything when dropped.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use tokio_postgres::Client;

/// Where Debian puts PostgreSQL 15's programs.
const BIN: &str = "/usr/lib/postgresql/15/bin";

/// How long a server may take to start, stop, promote or catch up on a
/// loaded machine.
const PATIENCE: Duration = Duration::from_secs(60);

/// How the primary commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replication {
    /// `synchronous_standby_names = '*'`, `synchronous_commit = on`: a
    /// commit is answered once the standby has flushed it.
    Synchronous,
    /// `synchronous_standby_names = ''`: a commit is answered once the
    /// primary has flushed it; the standby follows as it can.
    Asynchronous,
}

/// One server: its data directory and port.
#[derive(Debug)]
pub struct Node {
    pub name: &'static str,
    pub data: PathBuf,
    pub port: u16,
}

impl Node {
    fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// A connection to its `postgres` database.
    pub async fn connect(&self) -> Client {
        items_testkit::postgres::connect(&self.url("postgres"))
            .await
            .unwrap_or_else(|error| panic!("connect to {}: {error}", self.name))
    }

    /// A connection to its database `database`.
    pub async fn connect_to(&self, database: &str) -> Client {
        items_testkit::postgres::connect(&self.url(database))
            .await
            .unwrap_or_else(|error| panic!("connect to {}/{database}: {error}", self.name))
    }

    /// The postmaster's pid, from `postmaster.pid`.
    fn postmaster(&self) -> Option<u32> {
        std::fs::read_to_string(self.data.join("postmaster.pid"))
            .ok()?
            .lines()
            .next()?
            .trim()
            .parse()
            .ok()
    }
}

/// A primary and its standby, which trade places at each failover, and
/// any further standbys of the primary ([`Pair::add_standby`]).
pub struct Pair {
    root: tempfile::TempDir,
    pub nodes: Vec<Node>,
    /// The index of the primary in `nodes`.
    pub primary: usize,
    pub replication: Replication,
}

impl Drop for Pair {
    fn drop(&mut self) {
        for node in &self.nodes {
            if node.data.join("postmaster.pid").exists() {
                let _ = pg("pg_ctl")
                    .args(["-D", path(&node.data), "-m", "immediate", "-w", "stop"])
                    .output();
            }
            kill_leftovers(&node.data);
        }
    }
}

impl Pair {
    /// Makes the primary (`a`, with the database `items`) and its standby
    /// (`b`), and waits until the standby streams (and, synchronous, is
    /// the synchronous one).
    pub async fn start(replication: Replication) -> Self {
        assert!(
            Path::new(BIN).join("initdb").exists(),
            "the failover tests need PostgreSQL 15's programs in {BIN} (apt-get install postgresql-15)"
        );
        let root = tempfile::Builder::new()
            .prefix("failover-")
            .tempdir()
            .expect("a temporary directory");
        give_to_postgres(root.path());
        let node = |name| Node {
            name,
            data: root.path().join(name),
            port: free_port(),
        };
        let nodes = vec![node("a"), node("b")];
        let pair = Self {
            root,
            nodes,
            primary: 0,
            replication,
        };
        pair.initdb(0);
        pair.start_node(0);
        let admin = pair.nodes[0].connect().await;
        admin
            .batch_execute("create database items")
            .await
            .expect("the service's database is made");
        if replication == Replication::Synchronous {
            set_synchronous(&admin, "*").await;
        }
        drop(admin);
        pair.rebuild_standby(1).await;
        pair
    }

    pub fn primary(&self) -> &Node {
        &self.nodes[self.primary]
    }

    /// The service's `DATABASE_URL`: both hosts, `a` first, writable wanted.
    pub fn database_url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/items?target_session_attrs=read-write",
            self.nodes[0].port, self.nodes[1].port
        )
    }

    /// `SIGKILL` to the primary's postmaster: no shutdown, no goodbye to
    /// its clients or its standby. Its orphaned backends notice and exit on
    /// their own.
    pub fn kill_primary(&self) {
        let node = self.primary();
        let pid = node.postmaster().expect("the primary runs");
        let status = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -KILL {pid}");
    }

    /// Promotes the standby (`pg_ctl promote`, waiting until it accepts
    /// writes); it becomes the primary. Synchronous: it first stops asking
    /// for a synchronous standby, since it has none until the old primary
    /// is rebuilt ([`Pair::rebuild_standby`]).
    pub async fn promote_standby(&mut self) {
        let standby = 1 - self.primary;
        if self.replication == Replication::Synchronous {
            let admin = self.nodes[standby].connect().await;
            set_synchronous(&admin, "").await;
            drop(admin);
        }
        run(pg("pg_ctl").args([
            "-D",
            path(&self.nodes[standby].data),
            "-w",
            "-t",
            &PATIENCE.as_secs().to_string(),
            "promote",
        ]));
        self.primary = standby;
    }

    /// Makes node `index` a standby of the primary again: what was left of
    /// it (a killed primary's directory) goes, `pg_basebackup -R` copies the
    /// primary, and it starts and streams; synchronous, the primary then
    /// waits for it on every commit again.
    pub async fn rebuild_standby(&self, index: usize) {
        self.make_standby(index, "").await;
    }

    /// Adds a further streaming standby of the primary (asynchronous),
    /// `settings` appended to its configuration (`recovery_min_apply_delay
    /// = '3s'`, say), and returns its index in `nodes`. It is stopped and
    /// removed with the pair; the failover methods leave it alone.
    #[allow(dead_code)] // used by some test modules only
    pub async fn add_standby(&mut self, name: &'static str, settings: &str) -> usize {
        self.nodes.push(Node {
            name,
            data: self.root.path().join(name),
            port: free_port(),
        });
        let index = self.nodes.len() - 1;
        self.make_standby(index, settings).await;
        index
    }

    /// [`Pair::rebuild_standby`], with `settings` appended to the copy's
    /// configuration before it starts; waits until every standby streams.
    async fn make_standby(&self, index: usize, settings: &str) {
        let node = &self.nodes[index];
        kill_leftovers(&node.data);
        if node.data.exists() {
            std::fs::remove_dir_all(&node.data).expect("the old directory goes");
        }
        // A killed postmaster leaves its socket and the socket's lock file
        // (which names its pid) in the shared socket directory; once that
        // pid is another process's, a new server on the port refuses to
        // start. The server that owned them is gone: they go too.
        for leftover in [
            format!(".s.PGSQL.{}", node.port),
            format!(".s.PGSQL.{}.lock", node.port),
        ] {
            let _ = std::fs::remove_file(self.root.path().join(leftover));
        }
        let primary = self.primary();
        run(pg("pg_basebackup").args([
            "-h",
            "127.0.0.1",
            "-p",
            &primary.port.to_string(),
            "-U",
            "postgres",
            "-D",
            path(&node.data),
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
            // Copied into the page cache only: this machine does not crash,
            // and what the standby receives from now on it flushes itself.
            "--no-sync",
        ]));
        if !settings.is_empty() {
            append_settings(&node.data, settings);
        }
        self.start_node(index);
        let admin = primary.connect().await;
        let wanted = match self.replication {
            Replication::Synchronous => {
                set_synchronous(&admin, "*").await;
                "state = 'streaming' and sync_state = 'sync'"
            }
            Replication::Asynchronous => "state = 'streaming'",
        };
        let query = format!("select count(*) from pg_stat_replication where {wanted}");
        // Synchronous: the one synchronous standby; else every standby.
        let standbys = match self.replication {
            Replication::Synchronous => 1,
            Replication::Asynchronous => self.nodes.len() as i64 - 1,
        };
        let deadline = Instant::now() + PATIENCE;
        loop {
            let streaming: i64 = admin
                .query_one(&query, &[])
                .await
                .expect("pg_stat_replication is readable")
                .get(0);
            if streaming == standbys {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{} does not stream from {} after {PATIENCE:?}",
                node.name,
                primary.name
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        drop(admin);
    }

    /// Stops the standby (`fast`): the primary's synchronous commits wait.
    pub fn stop_standby(&self) {
        let standby = &self.nodes[1 - self.primary];
        run(pg("pg_ctl").args(["-D", path(&standby.data), "-m", "fast", "-w", "stop"]));
    }

    /// Starts the standby again; it catches up and confirms what waited.
    pub fn start_standby(&self) {
        self.start_node(1 - self.primary);
    }

    /// Stops node `index` (`fast`), whatever it is.
    pub fn stop_node(&self, index: usize) {
        let node = &self.nodes[index];
        run(pg("pg_ctl").args(["-D", path(&node.data), "-m", "fast", "-w", "stop"]));
    }

    /// The timeline node `index` writes on (a primary: its WAL's).
    pub async fn timeline(&self, index: usize) -> u32 {
        let admin = self.nodes[index].connect().await;
        let hex: String = admin
            .query_one(
                "select substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)",
                &[],
            )
            .await
            .expect("a primary's WAL file name")
            .get(0);
        u32::from_str_radix(&hex, 16).expect("hex")
    }

    fn initdb(&self, index: usize) {
        let node = &self.nodes[index];
        run(pg("initdb").args([
            "-D",
            path(&node.data),
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
            "--no-instructions",
        ]));
        // Appended by root, the file stays the postgres user's. The port
        // is given at each start, so a copy made by pg_basebackup keeps
        // its own.
        let settings = format!(
            "\nlisten_addresses = '127.0.0.1'\n\
             unix_socket_directories = '{}'\n\
             shared_buffers = 16MB\n\
             max_connections = 50\n\
             max_wal_senders = 4\n\
             wal_keep_size = 128MB\n\
             synchronous_commit = on\n\
             log_min_messages = warning\n",
            self.root.path().display()
        );
        append_settings(&node.data, &settings);
    }

    /// Starts node `index` as its directory says: an old primary stopped
    /// after its standby was promoted starts as a primary again, on its
    /// old timeline.
    pub fn start_node(&self, index: usize) {
        let node = &self.nodes[index];
        let log = self.root.path().join(format!("{}.log", node.name));
        let output = pg("pg_ctl")
            .args([
                "-D",
                path(&node.data),
                "-l",
                path(&log),
                "-o",
                &format!("-p {}", node.port),
                "-w",
                "-t",
                &PATIENCE.as_secs().to_string(),
                "start",
            ])
            .output()
            .expect("pg_ctl runs");
        assert!(
            output.status.success(),
            "{} does not start: {}\n{}",
            node.name,
            String::from_utf8_lossy(&output.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }
}

/// Appends `settings` to the `postgresql.conf` of `data`. Appended by
/// root, the file stays the postgres user's.
fn append_settings(data: &Path, settings: &str) {
    use std::io::Write as _;
    std::fs::OpenOptions::new()
        .append(true)
        .open(data.join("postgresql.conf"))
        .and_then(|mut file| file.write_all(format!("\n{settings}\n").as_bytes()))
        .expect("postgresql.conf takes the test's settings");
}

/// `synchronous_standby_names` on the server behind `admin`, reloaded.
async fn set_synchronous(admin: &Client, names: &str) {
    admin
        .batch_execute(&format!(
            "alter system set synchronous_standby_names = '{names}'"
        ))
        .await
        .expect("alter system");
    admin
        .batch_execute("select pg_reload_conf()")
        .await
        .expect("the configuration is reloaded");
}

/// A PostgreSQL program, run as the `postgres` user when the test is root.
fn pg(program: &str) -> Command {
    let program = Path::new(BIN).join(program);
    let mut command = if is_root() {
        let mut command = Command::new("setpriv");
        command
            .args(["--reuid=postgres", "--regid=postgres", "--clear-groups"])
            .arg(program);
        command
    } else {
        Command::new(program)
    };
    for variable in [
        "PGHOST",
        "PGPORT",
        "PGDATA",
        "PGUSER",
        "PGDATABASE",
        "PGPASSWORD",
    ] {
        command.env_remove(variable);
    }
    command
}

/// Runs `command` to its end; a failure fails the test with its output.
fn run(command: &mut Command) {
    let output = command.output().expect("the program runs");
    assert!(
        output.status.success(),
        "{command:?}: {}\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn path(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 temporary path")
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|line| line.starts_with("Uid:") && line.split_whitespace().nth(1) == Some("0"))
}

/// Gives `directory` to the `postgres` user when the test runs as root.
fn give_to_postgres(directory: &Path) {
    if !is_root() {
        return;
    }
    let id = |flag| {
        let output = Command::new("id")
            .args([flag, "postgres"])
            .output()
            .expect("id runs");
        String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse::<u32>()
            .expect("the postgres user exists")
    };
    std::os::unix::fs::chown(directory, Some(id("-u")), Some(id("-g")))
        .expect("the directory is given to postgres");
}

/// A loopback port nobody uses now, below the kernel's ephemeral range
/// (32768 and up): a server restarted on it after a kill must not find it
/// taken by some client's outgoing connection meanwhile.
fn free_port() -> u16 {
    use std::hash::{BuildHasher, RandomState};
    for attempt in 0u64.. {
        let dice = RandomState::new().hash_one((std::process::id(), attempt, Instant::now()));
        let port = 20_000 + (dice % 12_000) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
        assert!(attempt < 1000, "no free port between 20000 and 32000");
    }
    unreachable!("the loop returns or fails")
}

/// Waits until no process works in `data` any more (a killed postmaster's
/// backends, whose working directory it is, exit once they notice), and
/// kills those still there after a while: each is a process of the server
/// this test started.
fn kill_leftovers(data: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = processes_in(data);
        if left.is_empty() {
            return;
        }
        if Instant::now() > deadline {
            for pid in left {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The processes whose working directory is `data`.
fn processes_in(data: &Path) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cwd = std::fs::read_link(entry.path().join("cwd")).ok()?;
            (cwd == data).then_some(pid)
        })
        .collect()
}
