//! A lane's own connection to Redis: one socket, one script call at a time,
//! written and read in RESP2 by hand.
//!
//! Why not the redis crate's connection. Its multiplexed connection runs a
//! driver task of its own: each call is a command built argument by
//! argument (a buffer each), handed to that task over a channel, written,
//! read back into a tree of values and handed back over a second channel.
//! A lane never has more than one call in flight, so none of that buys it
//! anything, and it cost about 9,300 instructions a call, about what
//! running the script costs Redis itself (docs/performance.md, "An own
//! connection and a table of slots"). Here a call is one buffer written
//! with one `write`, and a reply read into one buffer and parsed in place,
//! on the lane's own task.
//!
//! What the crate still does: parse the URL (`Client::open`), hash the
//! script, and answer the health check's `PING` (`lanes.rs`).
//!
//! A connection whose call failed or ran out of time is dropped, never
//! reused: a late reply would otherwise be read as the next call's.

use std::io;

use redis::{ConnectionAddr, ConnectionInfo};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// What the connection reads and writes: TCP or a Unix socket.
trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// The most a reply may hold before it is refused as not ours: a batch's
/// reply is two numbers per group, far below this.
const MOST_REPLY_BYTES: usize = 1 << 20;

/// One connection, after its handshake.
pub(super) struct Connection {
    io: Box<dyn Io>,
    /// Bytes read and not yet parsed.
    read: Vec<u8>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").finish_non_exhaustive()
    }
}

/// A reply, as far as a lane needs to tell replies apart.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Reply {
    /// `+OK` and the like.
    Status(String),
    /// `-ERR …`: Redis refused the command.
    Error(String),
    /// `:n`.
    Integer(i64),
    /// `*n` followed by `n` integers: what `gcra.lua` returns.
    Integers(Vec<i64>),
}

impl Connection {
    /// Connects to the Redis `info` names and logs in there: `AUTH` when
    /// the URL holds a password, `SELECT` when it names a database.
    ///
    /// # Errors
    /// When the address cannot be reached, the address is one this build
    /// cannot speak to (TLS), or Redis refuses `AUTH` or `SELECT`.
    pub(super) async fn open(info: &ConnectionInfo) -> io::Result<Self> {
        let io: Box<dyn Io> = match info.addr() {
            ConnectionAddr::Tcp(host, port) => {
                let stream = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
                // One call, one segment: nothing is to be gained by waiting.
                stream.set_nodelay(true)?;
                Box::new(stream)
            }
            #[cfg(unix)]
            ConnectionAddr::Unix(path) => Box::new(tokio::net::UnixStream::connect(path).await?),
            other => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("this build cannot connect to {other}"),
                ));
            }
        };
        let mut connection = Self {
            io,
            read: Vec::with_capacity(512),
        };
        let settings = info.redis_settings();
        if let Some(password) = settings.password() {
            let auth = match settings.username() {
                Some(user) => encode(&[b"AUTH", user.as_bytes(), password.as_bytes()]),
                None => encode(&[b"AUTH", password.as_bytes()]),
            };
            connection.expect_ok(&auth, "AUTH").await?;
        }
        if settings.db() != 0 {
            let select = encode(&[b"SELECT", settings.db().to_string().as_bytes()]);
            connection.expect_ok(&select, "SELECT").await?;
        }
        Ok(connection)
    }

    async fn expect_ok(&mut self, command: &[u8], name: &str) -> io::Result<()> {
        match self.call(command).await? {
            Reply::Status(_) => Ok(()),
            other => Err(refused(name, &other)),
        }
    }

    /// Writes `command` (encoded whole, see [`Command`]) and reads its
    /// reply.
    ///
    /// # Errors
    /// When the socket fails or closes, or the reply is not RESP2 a lane
    /// expects.
    pub(super) async fn call(&mut self, command: &[u8]) -> io::Result<Reply> {
        self.io.write_all(command).await?;
        self.read.clear();
        loop {
            if let Some(reply) = parse(&self.read)? {
                return Ok(reply);
            }
            if self.read.len() > MOST_REPLY_BYTES {
                return Err(protocol("a reply larger than any the lane asks for"));
            }
            self.read.reserve(512);
            if self.io.read_buf(&mut self.read).await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
    }
}

/// Redis answered `name` with something else than what it succeeds with.
pub(super) fn refused(name: &str, reply: &Reply) -> io::Error {
    match reply {
        Reply::Error(message) => io::Error::other(format!("{name}: {message}")),
        other => protocol(&format!("{name} answered {other:?}")),
    }
}

fn protocol(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("Redis protocol: {what}"),
    )
}

/// A command's encoding, built in place: `*count`, then each part as a
/// bulk string. The count is known first (a batch's key and argument count
/// are), so nothing is buffered twice.
#[derive(Debug, Default)]
pub(super) struct Command {
    bytes: Vec<u8>,
    /// Where [`Command::part_with`] writes a part before it is framed.
    scratch: Vec<u8>,
}

impl Command {
    /// Starts a command of `parts` parts, dropping what was built before
    /// (the buffer is kept).
    pub(super) fn start(&mut self, parts: usize) -> &mut Self {
        self.bytes.clear();
        self.bytes.push(b'*');
        self.number(parts as u64);
        self
    }

    pub(super) fn part(&mut self, bytes: &[u8]) -> &mut Self {
        frame(&mut self.bytes, bytes);
        self
    }

    /// A part that is a number, in decimal.
    pub(super) fn number_part(&mut self, value: u64) -> &mut Self {
        let mut digits = itoa::Buffer::new();
        self.part(digits.format(value).as_bytes())
    }

    /// A part written by `write` (a key made of a prefix and an address,
    /// say), without an allocation of its own.
    pub(super) fn part_with(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> &mut Self {
        self.scratch.clear();
        write(&mut self.scratch);
        frame(&mut self.bytes, &self.scratch);
        self
    }

    fn number(&mut self, value: u64) {
        line_number(&mut self.bytes, value);
    }

    pub(super) fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// `$length`, then `bytes`, each on its line.
fn frame(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'$');
    line_number(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

fn line_number(out: &mut Vec<u8>, value: u64) {
    let mut digits = itoa::Buffer::new();
    out.extend_from_slice(digits.format(value).as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn encode(parts: &[&[u8]]) -> Vec<u8> {
    let mut command = Command::default();
    command.start(parts.len());
    for part in parts {
        command.part(part);
    }
    command.bytes
}

/// One whole reply at the start of `bytes`, or `None` while it is
/// incomplete.
fn parse(bytes: &[u8]) -> io::Result<Option<Reply>> {
    let Some((kind, line, mut rest)) = line(bytes) else {
        return Ok(None);
    };
    let text = || String::from_utf8_lossy(line).into_owned();
    match kind {
        b'+' => Ok(Some(Reply::Status(text()))),
        b'-' => Ok(Some(Reply::Error(text()))),
        b':' => Ok(Some(Reply::Integer(integer(line)?))),
        b'*' => {
            let count = usize::try_from(integer(line)?)
                .map_err(|_| protocol("a null or negative array"))?;
            let mut numbers = Vec::with_capacity(count.min(rest.len() / 4));
            for _ in 0..count {
                let Some((kind, line, after)) = self::line(rest) else {
                    return Ok(None);
                };
                if kind != b':' {
                    return Err(protocol("an array of something else than integers"));
                }
                numbers.push(integer(line)?);
                rest = after;
            }
            Ok(Some(Reply::Integers(numbers)))
        }
        other => Err(protocol(&format!(
            "a reply of type {:?}",
            char::from(other)
        ))),
    }
}

/// The first line of `bytes`: its type byte, its text (without `\r\n`),
/// and what follows it; `None` while the line is incomplete.
fn line(bytes: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&kind, rest) = bytes.split_first()?;
    let end = rest.windows(2).position(|pair| pair == b"\r\n")?;
    Some((kind, &rest[..end], &rest[end + 2..]))
}

fn integer(text: &[u8]) -> io::Result<i64> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| protocol("a number that is not one"))
}

#[cfg(test)]
mod tests {
    //! The encoding and the parser on their own, then against the
    //! project's Redis on 127.0.0.1:6379 (these fail, never skip, without
    //! it).

    use super::*;

    #[test]
    fn a_command_is_an_array_of_bulk_strings() {
        let mut command = Command::default();
        command
            .start(3)
            .part(b"SET")
            .part_with(|key| key.extend_from_slice(b"prefix:1.2.3.4"))
            .number_part(42);
        assert_eq!(
            command.bytes(),
            b"*3\r\n$3\r\nSET\r\n$14\r\nprefix:1.2.3.4\r\n$2\r\n42\r\n"
        );
        command.start(1).part(b"PING");
        assert_eq!(command.bytes(), b"*1\r\n$4\r\nPING\r\n", "started afresh");
    }

    #[test]
    fn replies_are_parsed_once_whole_and_not_before() {
        let whole = b"*4\r\n:0\r\n:12\r\n:-3\r\n:40\r\n";
        for end in 0..whole.len() {
            assert_eq!(parse(&whole[..end]).unwrap(), None, "{end} bytes");
        }
        assert_eq!(
            parse(whole).unwrap(),
            Some(Reply::Integers(vec![0, 12, -3, 40]))
        );
        assert_eq!(parse(b"+OK\r\n").unwrap(), Some(Reply::Status("OK".into())));
        assert_eq!(
            parse(b"-NOSCRIPT No matching script\r\n").unwrap(),
            Some(Reply::Error("NOSCRIPT No matching script".into()))
        );
        assert_eq!(parse(b":7\r\n").unwrap(), Some(Reply::Integer(7)));
        assert_eq!(parse(b"*0\r\n").unwrap(), Some(Reply::Integers(vec![])));
    }

    #[test]
    fn replies_a_lane_never_asks_for_are_refused_not_misread() {
        for bad in [
            &b"$3\r\nabc\r\n"[..],
            b"*1\r\n$1\r\nx\r\n",
            b"*-1\r\n",
            b":twelve\r\n",
            b"%1\r\n",
        ] {
            let error = parse(bad).unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{bad:?}");
        }
    }

    fn info(url: &str) -> ConnectionInfo {
        redis::Client::open(url)
            .unwrap()
            .get_connection_info()
            .clone()
    }

    #[tokio::test]
    async fn a_connection_selects_the_database_its_url_names() {
        let key = format!("items-service-unit-test:resp:{}", std::process::id());
        let mut connection = Connection::open(&info("redis://127.0.0.1:6379/13"))
            .await
            .expect("Redis must answer on 127.0.0.1:6379");
        let mut command = Command::default();
        command
            .start(5)
            .part(b"SET")
            .part(key.as_bytes())
            .part(b"1");
        command.part(b"PX").number_part(60_000);
        assert_eq!(
            connection.call(command.bytes()).await.unwrap(),
            Reply::Status("OK".into())
        );
        command.start(2).part(b"EXISTS").part(key.as_bytes());
        let mut elsewhere = Connection::open(&info("redis://127.0.0.1:6379/12"))
            .await
            .unwrap();
        assert_eq!(
            elsewhere.call(command.bytes()).await.unwrap(),
            Reply::Integer(0)
        );
        assert_eq!(
            connection.call(command.bytes()).await.unwrap(),
            Reply::Integer(1)
        );
        command.start(2).part(b"DEL").part(key.as_bytes());
        connection.call(command.bytes()).await.unwrap();
    }

    #[tokio::test]
    async fn a_password_redis_does_not_expect_is_refused_at_the_handshake() {
        let refused = Connection::open(&info("redis://:not-the-password@127.0.0.1:6379/"))
            .await
            .expect_err("this Redis has no password");
        assert!(refused.to_string().starts_with("AUTH: "), "{refused}");
    }

    #[tokio::test]
    async fn a_closed_port_fails_the_open() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let url = format!("redis://127.0.0.1:{port}/");
        assert!(Connection::open(&info(&url)).await.is_err());
    }
}
