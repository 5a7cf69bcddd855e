//! A lane's way to run `gcra.lua`: its own connection (`resp.rs`), opened
//! when a call needs one and dropped after any failure, and the script
//! called by its hash, sent whole only when Redis does not know it yet
//! (after a restart, a `SCRIPT FLUSH`, or on a Redis never used before).

use std::io;

use redis::ConnectionInfo;
use tokio::time::Instant;

use super::resp::{self, Command, Connection, Reply};

/// The script every lane runs, and its SHA-1 as `EVALSHA` names it.
#[derive(Debug)]
pub(super) struct Script {
    source: String,
    sha: String,
}

impl Script {
    pub(super) fn gcra() -> Self {
        Self::new(include_str!("gcra.lua"))
    }

    fn new(source: impl Into<String>) -> Self {
        let source = source.into();
        let sha = redis::Script::new(&source).get_hash().to_owned();
        Self { source, sha }
    }
}

/// One lane's connection, if it has one, and the buffer its calls are
/// written into.
#[derive(Debug)]
pub(super) struct Link {
    info: ConnectionInfo,
    connection: Option<Connection>,
    command: Command,
}

/// How a call's keys and arguments are written (after the command's name,
/// the script and the key count).
pub(super) trait Arguments {
    /// How many keys, then how many arguments after them.
    fn counts(&self) -> (usize, usize);
    /// Writes the keys, then the arguments, as parts of `command`.
    fn write(&self, command: &mut Command);
}

impl Link {
    pub(super) fn new(info: ConnectionInfo) -> Self {
        Self {
            info,
            connection: None,
            command: Command::default(),
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
        script: &Script,
        arguments: &impl Arguments,
        deadline: Instant,
    ) -> io::Result<Vec<i64>> {
        let ran = tokio::time::timeout_at(deadline, self.try_run(script, arguments)).await;
        let ran = ran.unwrap_or_else(|_| {
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no answer within the rate-limit store's time bound",
            ))
        });
        if ran.is_err() {
            // Mid-call, or refused: what the socket holds next is unknown.
            self.connection = None;
        }
        ran
    }

    async fn try_run(
        &mut self,
        script: &Script,
        arguments: &impl Arguments,
    ) -> io::Result<Vec<i64>> {
        let connection = match &mut self.connection {
            Some(connection) => connection,
            None => self.connection.insert(Connection::open(&self.info).await?),
        };
        write_call(
            &mut self.command,
            "EVALSHA",
            script.sha.as_bytes(),
            arguments,
        );
        let reply = match connection.call(self.command.bytes()).await? {
            Reply::Error(message) if message.starts_with("NOSCRIPT") => {
                write_call(
                    &mut self.command,
                    "EVAL",
                    script.source.as_bytes(),
                    arguments,
                );
                connection.call(self.command.bytes()).await?
            }
            reply => reply,
        };
        match reply {
            Reply::Integers(numbers) => Ok(numbers),
            other => Err(resp::refused("the rate-limit script", &other)),
        }
    }
}

/// `EVALSHA sha` or `EVAL source`, the key count, the keys, the arguments.
fn write_call(command: &mut Command, name: &str, script: &[u8], arguments: &impl Arguments) {
    let (keys, others) = arguments.counts();
    command
        .start(3 + keys + others)
        .part(name.as_bytes())
        .part(script)
        .number_part(keys as u64);
    arguments.write(command);
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
    fn counting_script() -> Script {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let run = format!("{}:{now}", std::process::id());
        Script::new(format!("-- {run}\nreturn {{#KEYS, tonumber(ARGV[1])}}"))
    }

    struct Two(u64);

    impl Arguments for Two {
        fn counts(&self) -> (usize, usize) {
            (2, 1)
        }

        fn write(&self, command: &mut Command) {
            command.part(b"a").part(b"b").number_part(self.0);
        }
    }

    fn link() -> Link {
        let client = redis::Client::open("redis://127.0.0.1:6379/").unwrap();
        Link::new(client.get_connection_info().clone())
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    #[tokio::test]
    async fn a_script_redis_does_not_know_is_sent_whole_then_called_by_its_hash() {
        let script = counting_script();
        let mut link = link();

        assert_eq!(link.run(&script, &Two(7), soon()).await.unwrap(), [2, 7]);
        assert_eq!(link.run(&script, &Two(8), soon()).await.unwrap(), [2, 8]);
    }

    #[tokio::test]
    async fn a_call_past_its_deadline_fails_and_the_next_opens_a_new_connection() {
        let script = counting_script();
        let mut link = link();
        link.run(&script, &Two(1), soon()).await.unwrap();
        // Past already: the reply cannot come in the first poll.
        let past = Instant::now() - Duration::from_millis(10);
        let failed = link.run(&script, &Two(2), past).await;
        assert_eq!(failed.unwrap_err().kind(), io::ErrorKind::TimedOut);
        assert!(link.connection.is_none(), "dropped, not reused");
        assert_eq!(link.run(&script, &Two(3), soon()).await.unwrap(), [2, 3]);
    }
}
