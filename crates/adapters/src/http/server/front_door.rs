//! Closing the listener without resetting a client that already connected.
//!
//! When actix-server stops, it closes the listening socket, and the kernel
//! resets every connection whose handshake had completed but which nobody
//! had accepted yet. actix-server also drops the connections its accept
//! thread had handed to a worker that was told to stop before it picked
//! them up. A client that sent its request on such a connection sees a
//! reset and cannot tell whether it was served. The drain test caught this
//! once in many CI runs: 1 request lost out of 68 at the very end of a drain.
//!
//! So before the stop, the listener is closed to *new* clients only:
//! - A socket filter drops every segment that carries SYN, so no new
//!   handshake starts. The client's SYN is sent again a second later and is
//!   then refused, because the listener is gone by then. That is a clean
//!   failure, which load balancers retry.
//! - Handshakes already under way still complete (their last segment is a
//!   plain ACK), and established connections are untouched.
//! - After [`ACCEPT_GRACE`], the accept thread has taken every queued
//!   connection and a worker holds each one. The worker serves it to the
//!   end, and the response says `Connection: close` (the drain).
//!
//! Recent Linux kernels (6.18 on this project's machines) require
//! `CAP_NET_ADMIN` to attach a socket filter to a TCP socket; without it the
//! stop goes on as actix's own (a connection queued in the last moment may be
//! reset), and says so once, naming the capability. The shipped systemd unit
//! does not grant it (it is broad: interfaces, routes); with `ADMIN_PORT`
//! and `SHUTDOWN_DRAIN_MS`, a balancer stops sending before the listener
//! closes, which leaves that moment empty (docs/operations.md, "Run under
//! systemd").

use std::net::TcpListener;
use std::time::Duration;

use socket2::{SockFilter, Socket};

/// How long the accept thread gets to empty the accept queue and hand what
/// it took to the workers. It runs on its own thread and needs
/// microseconds per connection; 100 ms leaves room for a machine busy
/// enough that the thread waits for a core, and is invisible in a shutdown.
const ACCEPT_GRACE: Duration = Duration::from_millis(100);

/// A classic BPF program that drops any TCP segment with SYN set and keeps
/// everything else. A socket filter on a TCP socket sees the segment from
/// its TCP header on, where byte 13 holds the flags and 0x02 is SYN.
/// Sockets accepted after the filter is attached inherit it, which is why
/// it must keep every segment that is not a SYN.
fn refuse_syn() -> [SockFilter; 4] {
    const LOAD_BYTE_AT: u16 = 0x30; // BPF_LD | BPF_B | BPF_ABS
    const JUMP_IF_ANY_BIT: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
    const RETURN: u16 = 0x06; // BPF_RET | BPF_K
    const TCP_FLAGS: u32 = 13;
    const SYN: u32 = 0x02;
    [
        SockFilter::new(LOAD_BYTE_AT, 0, 0, TCP_FLAGS),
        // SYN set: jump over the next instruction, to the drop.
        SockFilter::new(JUMP_IF_ANY_BIT, 1, 0, SYN),
        SockFilter::new(RETURN, 0, 0, u32::MAX),
        SockFilter::new(RETURN, 0, 0, 0),
    ]
}

/// A second handle on the public listening socket, to close it gently.
#[derive(Debug)]
pub(crate) struct FrontDoor(Socket);

impl FrontDoor {
    /// A handle on `listener`'s socket. It keeps the socket listening while
    /// it lives, so it is dropped as a stop begins: after closing the door
    /// on the shutdown signal, or at once on a stop through the server's
    /// handle (`public.rs`).
    pub(crate) fn of(listener: &TcpListener) -> std::io::Result<Self> {
        Ok(Self(Socket::from(listener.try_clone()?)))
    }

    /// Stops new handshakes, then gives the accept thread [`ACCEPT_GRACE`]
    /// to hand every queued connection to a worker. If the filter cannot be
    /// attached, this is said once and the stop goes on as before.
    pub(crate) async fn close_to_new_clients(self) {
        match self.refuse_new_clients() {
            Ok(()) => tokio::time::sleep(ACCEPT_GRACE).await,
            Err(error) => tracing::warn!(
                target: "items_service::http",
                %error,
                "{}",
                fallback_warning(&error)
            ),
        }
    }

    fn refuse_new_clients(&self) -> std::io::Result<()> {
        self.0.attach_filter(&refuse_syn())
    }
}

/// What the log says when the listener cannot be closed to new clients
/// first: what it means, and, for a refusal, the capability that is missing.
fn fallback_warning(error: &std::io::Error) -> &'static str {
    if error.kind() == std::io::ErrorKind::PermissionDenied {
        "could not close the listener to new clients first: attaching its SYN filter needs \
         CAP_NET_ADMIN here; connections queued but not yet accepted will be reset (with \
         ADMIN_PORT and SHUTDOWN_DRAIN_MS a balancer stops sending first)"
    } else {
        "could not close the listener to new clients first; connections queued but not yet \
         accepted will be reset"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_filter_is_logged_with_the_capability_it_needs() {
        let refused = std::io::Error::from_raw_os_error(1); // EPERM
        assert!(fallback_warning(&refused).contains("CAP_NET_ADMIN"));
        let other = std::io::Error::other("no memory");
        assert!(!fallback_warning(&other).contains("CAP_NET_ADMIN"));
        assert!(fallback_warning(&other).contains("will be reset"));
    }
    use std::io::{Read, Write};
    use std::net::TcpStream;

    #[tokio::test]
    async fn a_closed_front_door_refuses_new_handshakes_and_keeps_queued_connections() {
        closed_door_on("127.0.0.1:0").await;
    }

    /// The filter reads the TCP header, which comes at the same place for
    /// both IP versions (`HOST=::` listens on IPv6).
    #[tokio::test]
    async fn the_front_door_closes_the_same_way_on_ipv6() {
        closed_door_on("[::1]:0").await;
    }

    async fn closed_door_on(bind: &str) {
        let listener = TcpListener::bind(bind).unwrap();
        let address = listener.local_addr().unwrap();
        // Connected (the kernel completed the handshake) but not accepted.
        let mut queued = TcpStream::connect(address).unwrap();

        let door = FrontDoor::of(&listener).unwrap();
        door.refuse_new_clients().unwrap();

        let newcomer = tokio::time::timeout(
            Duration::from_millis(300),
            tokio::net::TcpStream::connect(address),
        )
        .await;
        assert!(
            newcomer.is_err(),
            "a new client's handshake completed: {newcomer:?}"
        );

        // The queued connection is accepted and its bytes flow both ways.
        queued.write_all(b"ping").unwrap();
        let (mut accepted, _) = listener.accept().unwrap();
        let mut received = [0u8; 4];
        accepted.read_exact(&mut received).unwrap();
        assert_eq!(&received, b"ping");
        accepted.write_all(b"pong").unwrap();
        queued.read_exact(&mut received).unwrap();
        assert_eq!(&received, b"pong");
    }

    #[tokio::test]
    async fn once_the_front_door_is_dropped_with_the_listener_new_clients_are_refused() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let door = FrontDoor::of(&listener).unwrap();
        drop(listener);
        // The door's handle alone keeps the socket listening…
        assert!(TcpStream::connect(address).is_ok());
        drop(door);
        // …and with it gone, the port refuses.
        assert!(TcpStream::connect(address).is_err());
    }
}
