//! A lane's script calls, through the redis crate: one `EVALSHA` of a
//! script by its hash on the lane's own multiplexed connection, the script
//! loaded (`SCRIPT LOAD`) and called again when Redis does not know it
//! (after a restart, a `SCRIPT FLUSH`, or on a Redis never used before).
//!
//! Invariants: a call ends by its deadline, connecting and loading
//! included; the connection is opened when a call needs one and dropped
//! after any failure, a missed deadline included, so the next call opens
//! another and a connection whose replies stopped coming is never kept.
//!
//! Why: <1% of a request at 50 decisions a call (docs/performance.md, "The Redis store, measured").

use std::io;

use redis::aio::MultiplexedConnection;
use redis::{
    AsyncConnectionConfig, Client, Cmd, ErrorKind, RedisError, RedisResult, ServerErrorKind,
};
use tokio::time::Instant;

/// How a call's keys and arguments are written, after the script's hash
/// and the key count.
pub(super) trait Arguments {
    /// How many of the parts written are keys (they come first).
    fn keys(&self) -> usize;
    /// Writes the keys, then the other arguments, as parts of `command`.
    fn write(&self, command: &mut Cmd);
}

/// One lane's connection, if it has one, and the command its calls are
/// written into.
///
/// A multiplexed connection of the lane's own rather than the crate's
/// `ConnectionManager`: the manager replaces its connection only after an
/// I/O error and keeps one whose replies stopped coming, where a lane is to
/// drop its connection after any failure.
pub(super) struct Connection {
    client: Client,
    config: AsyncConnectionConfig,
    open: Option<MultiplexedConnection>,
    command: Cmd,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("open", &self.open.is_some())
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// A connection to the Redis `client` names, opened by the first call;
    /// `config` holds the crate's own timeouts.
    pub(super) fn new(client: Client, config: AsyncConnectionConfig) -> Self {
        Self {
            client,
            config,
            open: None,
            command: Cmd::new(),
        }
    }

    /// Runs `script` over `arguments` by `deadline`: the numbers it
    /// returned.
    ///
    /// # Errors
    /// When no connection could be opened, Redis failed or refused the
    /// script, or `deadline` passed first; the connection is then dropped,
    /// and the next call opens another.
    pub(super) async fn run(
        &mut self,
        script: &redis::Script,
        arguments: &impl Arguments,
        deadline: Instant,
    ) -> RedisResult<Vec<i64>> {
        self.command.clear();
        self.command
            .arg("EVALSHA")
            .arg(script.get_hash())
            .arg(arguments.keys());
        arguments.write(&mut self.command);
        let call = call(
            &self.client,
            &self.config,
            &mut self.open,
            &self.command,
            script,
        );
        let ran = tokio::time::timeout_at(deadline, call)
            .await
            .unwrap_or_else(|_| {
                Err(RedisError::from(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no answer within the rate-limit store's time bound",
                )))
            });
        if ran.is_err() {
            self.open = None;
        }
        ran
    }
}

/// `command` (an `EVALSHA` of `script`) on `open`, opened first if there is
/// none; `script` loaded and the command sent again on `NOSCRIPT`.
async fn call(
    client: &Client,
    config: &AsyncConnectionConfig,
    open: &mut Option<MultiplexedConnection>,
    command: &Cmd,
    script: &redis::Script,
) -> RedisResult<Vec<i64>> {
    let connection = match open {
        Some(connection) => connection,
        None => open.insert(
            client
                .get_multiplexed_async_connection_with_config(config)
                .await?,
        ),
    };
    match command.query_async(connection).await {
        Err(error) if error.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
            script.load_async(connection).await?;
            command.query_async(connection).await
        }
        ran => ran,
    }
}

#[cfg(test)]
mod tests {
    //! Against the project's Redis on 127.0.0.1:6379 (these fail, never
    //! skip, without it).

    use std::time::Duration;

    use super::*;

    /// `return {#KEYS, n}`, with a comment no other run has written, so
    /// Redis has never seen it (and no script shared with other tests is
    /// flushed to show it).
    fn counting_script() -> redis::Script {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let run = format!("{}:{now}", std::process::id());
        redis::Script::new(&format!("-- {run}\nreturn {{#KEYS, tonumber(ARGV[1])}}"))
    }

    struct Two(u64);

    impl Arguments for Two {
        fn keys(&self) -> usize {
            2
        }

        fn write(&self, command: &mut Cmd) {
            command.arg("a").arg("b").arg(self.0);
        }
    }

    fn connection() -> Connection {
        let client = Client::open("redis://127.0.0.1:6379/").unwrap();
        Connection::new(client, AsyncConnectionConfig::new())
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    #[tokio::test]
    async fn a_script_redis_does_not_know_is_loaded_then_called_by_its_hash() {
        let script = counting_script();
        let mut connection = connection();

        assert_eq!(
            connection.run(&script, &Two(7), soon()).await.unwrap(),
            [2, 7]
        );
        assert_eq!(
            connection.run(&script, &Two(8), soon()).await.unwrap(),
            [2, 8]
        );
    }

    #[tokio::test]
    async fn a_call_past_its_deadline_fails_and_the_next_opens_a_new_connection() {
        let script = counting_script();
        let mut connection = connection();
        connection.run(&script, &Two(1), soon()).await.unwrap();
        // Past already: the reply cannot come in the first poll.
        let past = Instant::now() - Duration::from_millis(10);
        let failed = connection.run(&script, &Two(2), past).await;
        assert!(failed.unwrap_err().is_timeout());
        assert!(connection.open.is_none(), "dropped, not reused");
        assert_eq!(
            connection.run(&script, &Two(3), soon()).await.unwrap(),
            [2, 3]
        );
    }
}
