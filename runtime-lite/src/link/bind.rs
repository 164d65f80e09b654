//! A TCP connection from a chosen local address: the standard library connects only from the
//! address the routing table picks, but a transfer must leave on the address of the link the
//! schedule names (on loopback, or where two links share a subnet, the routes alone would
//! pick another).

use std::io;
use std::net::{SocketAddr, SocketAddrV4, TcpStream};
use std::os::fd::{FromRawFd, OwnedFd};
use std::time::Duration;

/// Connects from `local` (any port) to `peer`, giving up after `timeout`. IPv4 only.
pub(crate) fn connect_from(
    local: SocketAddr,
    peer: SocketAddr,
    timeout: Duration,
) -> io::Result<TcpStream> {
    let (SocketAddr::V4(local), SocketAddr::V4(peer)) = (local, peer) else {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "the link transport connects over IPv4 only",
        ));
    };
    // SAFETY: plain system call; the descriptor it returns is owned at once below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new, valid descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let stream = TcpStream::from(fd);
    // Linux bounds a blocking connect by the send timeout.
    stream.set_write_timeout(Some(timeout.max(Duration::from_millis(1))))?;
    let raw = std::os::fd::AsRawFd::as_raw_fd(&stream);
    let bound = sockaddr(&local);
    // SAFETY: `bound` is a valid `sockaddr_in` of the size passed, alive during the call.
    let rc = unsafe {
        libc::bind(
            raw,
            std::ptr::from_ref(&bound).cast::<libc::sockaddr>(),
            size_of_sockaddr(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let target = sockaddr(&peer);
    // SAFETY: as for `bind`.
    let rc = unsafe {
        libc::connect(
            raw,
            std::ptr::from_ref(&target).cast::<libc::sockaddr>(),
            size_of_sockaddr(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    stream.set_write_timeout(None)?;
    Ok(stream)
}

fn size_of_sockaddr() -> libc::socklen_t {
    libc::socklen_t::try_from(std::mem::size_of::<libc::sockaddr_in>()).unwrap_or(16)
}

fn sockaddr(a: &SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(a.ip().octets()),
        },
        sin_zero: [0; 8],
    }
}
