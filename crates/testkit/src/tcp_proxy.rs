//! A TCP proxy in front of a dependency (PostgreSQL, Redis) that a test can
//! cut and restore, or freeze and thaw, to show what an adapter does while
//! the dependency is unreachable (`RepositoryError::Unavailable`) or stalled
//! (C12's statement budget), and that it recovers.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the proxy does with its connections now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Bytes flow both ways.
    Open,
    /// Connections stay open and new ones are accepted, but no byte is
    /// forwarded either way — a server paused, or a network dropping
    /// packets silently: no reset, no refusal. Bytes already sent wait in
    /// the proxy and flow on at the thaw, as they would reach a paused
    /// server when it resumes.
    Frozen,
    /// Every connection dropped, new ones refused.
    Cut,
}

/// A TCP proxy that a test can cut (every connection dropped, new ones
/// refused) and restore on the same port, or freeze (nothing forwarded,
/// nothing closed) and thaw.
#[derive(Debug)]
pub struct TcpProxy {
    port: u16,
    state: watch::Sender<State>,
}

impl TcpProxy {
    /// Listens on a free loopback port and forwards each connection to
    /// `target`.
    ///
    /// # Panics
    /// When no loopback port can be bound (test support: a panic fails the
    /// test).
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free loopback port");
        let port = listener
            .local_addr()
            .expect("a bound listener has an address")
            .port();
        let (state, mut watch) = watch::channel(State::Open);
        tokio::spawn(async move {
            let mut listener = Some(listener);
            loop {
                if *watch.borrow() == State::Cut {
                    listener = None; // refuse new connections while cut
                    if watch.changed().await.is_err() {
                        return;
                    }
                    continue;
                }
                let accepting = match &listener {
                    Some(listener) => listener,
                    None => {
                        listener = Some(
                            TcpListener::bind(("127.0.0.1", port))
                                .await
                                .expect("the proxy's port is free again"),
                        );
                        continue;
                    }
                };
                tokio::select! {
                    accepted = accepting.accept() => {
                        let Ok((client, _)) = accepted else { continue };
                        tokio::spawn(forward(client, target, watch.clone()));
                    }
                    changed = watch.changed() => if changed.is_err() { return },
                }
            }
        });
        Self { port, state }
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Cuts (every connection dropped, new ones refused) or restores.
    pub fn set_cut(&self, cut: bool) {
        self.state
            .send_replace(if cut { State::Cut } else { State::Open });
    }

    /// Stops forwarding bytes, both ways, on every connection, old and new,
    /// without closing or refusing any: what a client sees of a paused
    /// server.
    pub fn freeze(&self) {
        self.state.send_replace(State::Frozen);
    }

    /// Forwards again what waited during the freeze, and what follows.
    pub fn thaw(&self) {
        self.state.send_replace(State::Open);
    }
}

/// Forwards one connection both ways until either side closes or the proxy
/// is cut.
async fn forward(client: TcpStream, target: SocketAddr, mut watch: watch::Receiver<State>) {
    let Ok(server) = TcpStream::connect(target).await else {
        return;
    };
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let (up, down) = (watch.clone(), watch.clone());
    tokio::select! {
        _ = async {
            tokio::join!(
                pump(client_read, server_write, up),
                pump(server_read, client_write, down),
            )
        } => {}
        _ = watch.wait_for(|state| *state == State::Cut) => {}
    }
}

/// Copies `from` to `to`, holding every chunk read while the proxy is
/// frozen until it thaws; passes the end of the stream on the same way.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut watch: watch::Receiver<State>) {
    let mut buffer = vec![0; 16 * 1024];
    loop {
        let read = from.read(&mut buffer).await;
        if watch
            .wait_for(|state| *state != State::Frozen)
            .await
            .is_err()
        {
            return;
        }
        match read {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(n) => {
                if to.write_all(&buffer[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// An echo server on a free loopback port.
    async fn echo() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut read, mut write) = socket.split();
                    let _ = tokio::io::copy(&mut read, &mut write).await;
                });
            }
        });
        address
    }

    async fn round_trip(stream: &mut TcpStream, bytes: &[u8]) -> Vec<u8> {
        stream.write_all(bytes).await.unwrap();
        let mut answer = vec![0; bytes.len()];
        stream.read_exact(&mut answer).await.unwrap();
        answer
    }

    #[tokio::test]
    async fn a_frozen_proxy_forwards_nothing_closes_nothing_and_thaws_c12() {
        let proxy = TcpProxy::start(echo().await).await;
        let mut before = TcpStream::connect(("127.0.0.1", proxy.port()))
            .await
            .unwrap();
        assert_eq!(round_trip(&mut before, b"ping").await, b"ping");

        proxy.freeze();
        before.write_all(b"held").await.unwrap();
        let mut answer = [0; 4];
        let waited =
            tokio::time::timeout(Duration::from_millis(300), before.read(&mut answer)).await;
        assert!(waited.is_err(), "no byte, no end of stream while frozen");
        // A new connection is accepted, not refused, and hears nothing.
        let mut during = TcpStream::connect(("127.0.0.1", proxy.port()))
            .await
            .expect("a frozen proxy accepts");
        during.write_all(b"late").await.unwrap();
        let waited =
            tokio::time::timeout(Duration::from_millis(300), during.read(&mut answer)).await;
        assert!(waited.is_err(), "no byte, no end of stream while frozen");

        proxy.thaw();
        before.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"held", "what waited flows on at the thaw");
        during.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"late");
        assert_eq!(round_trip(&mut before, b"pong").await, b"pong");
    }

    #[tokio::test]
    async fn a_cut_proxy_drops_connections_and_refuses_until_restored() {
        let proxy = TcpProxy::start(echo().await).await;
        let mut before = TcpStream::connect(("127.0.0.1", proxy.port()))
            .await
            .unwrap();
        assert_eq!(round_trip(&mut before, b"ping").await, b"ping");

        proxy.set_cut(true);
        let mut answer = [0; 1];
        let read = tokio::time::timeout(Duration::from_secs(5), before.read(&mut answer))
            .await
            .expect("the cut ends the connection");
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");

        proxy.set_cut(false);
        let mut after = loop {
            // The listener is bound again a moment after the restore.
            match TcpStream::connect(("127.0.0.1", proxy.port())).await {
                Ok(stream) => break stream,
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        };
        assert_eq!(round_trip(&mut after, b"back").await, b"back");
    }
}
