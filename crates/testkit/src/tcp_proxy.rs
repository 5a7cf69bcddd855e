//! A TCP proxy in front of a dependency (PostgreSQL, Redis) that a test can
//! cut and restore, to show what an adapter does while the dependency is
//! unreachable (`RepositoryError::Unavailable`) and that it recovers.

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A TCP proxy that a test can cut (every connection dropped, new ones
/// refused) and restore on the same port.
#[derive(Debug)]
pub struct TcpProxy {
    port: u16,
    cut: watch::Sender<bool>,
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
        let (cut, mut is_cut) = watch::channel(false);
        tokio::spawn(async move {
            let mut listener = Some(listener);
            loop {
                if *is_cut.borrow() {
                    listener = None; // refuse new connections while cut
                    if is_cut.changed().await.is_err() {
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
                        let mut watch = is_cut.clone();
                        tokio::spawn(async move {
                            let Ok(mut server) = TcpStream::connect(target).await else { return };
                            let mut client = client;
                            tokio::select! {
                                _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                                _ = watch.wait_for(|cut| *cut) => {}
                            }
                        });
                    }
                    changed = is_cut.changed() => if changed.is_err() { return },
                }
            }
        });
        Self { port, cut }
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Cuts (every connection dropped, new ones refused) or restores.
    pub fn set_cut(&self, cut: bool) {
        self.cut.send_replace(cut);
    }
}
