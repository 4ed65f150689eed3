//! Accepting connections on a worker.
//!
//! A worker polls a listening socket through its own tokio reactor. A `reuseport` socket belongs
//! to one worker, so there is nothing to share. A shared socket is polled by every worker; to
//! wake only one worker per connection (nginx's EPOLLEXCLUSIVE, what `accept_mutex` used to do)
//! the socket's registration in this worker's epoll is redone with `EPOLLEXCLUSIVE`, keeping the
//! token tokio gave it (read from `/proc/self/fdinfo` of the reactor's epoll). The kernel then
//! wakes one *waiting* worker per connection: a busy worker is skipped, an idle one takes it.
//! If that cannot be done, the plain registration stays: correct, with a small herd.
//!
//! The registration is level-triggered (the same re-registration, for a worker's own `reuseport`
//! socket too), as nginx's listening sockets: a connection accepted clears the readiness, and
//! epoll reports the socket again while more wait. So one accept4() per connection, not a
//! second one to hear EAGAIN before the worker sleeps (edge-triggered needs the queue drained).
//!
//! Why not a nested epoll with EPOLLEXCLUSIVE: the kernel counts an exclusive wake-up only when
//! a thread waits on that epoll itself; nested in tokio's, every worker would be woken.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use crate::error::Error;

/// This worker's duplicate of a listening socket (the master owns the original). Each worker
/// registers its own fd number, so its registration can be found unambiguously.
struct ListenFd(OwnedFd);

impl AsRawFd for ListenFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// Accepts on one listening socket from one worker.
pub struct Acceptor {
    io: AsyncFd<ListenFd>,
    /// Accept until EAGAIN on each wake-up (`multi_accept on`), else one per turn.
    multi_accept: bool,
    exclusive: bool,
    /// Registered level-triggered (else tokio's edge-triggered one stayed).
    level: bool,
    /// The last call accepted one connection without `multi_accept`: yield before the next.
    yield_first: std::cell::Cell<bool>,
}

impl Acceptor {
    /// Registers `own` (this worker's duplicate of the listening socket) with this thread's
    /// reactor. `shared`: other workers poll the socket too.
    pub fn new(own: OwnedFd, shared: bool, multi_accept: bool) -> io::Result<Acceptor> {
        let dup = own.as_raw_fd();
        // SAFETY: ListenFd owns its fd and keeps it open for as long as the AsyncFd lives.
        let io = unsafe { AsyncFd::register_with_interest(ListenFd(own), Interest::READABLE) }
            .map_err(|e| e.into_parts().1)?;
        let exclusive = shared && reregister(dup, true).is_ok();
        let level = exclusive || reregister(dup, false).is_ok();
        Ok(Acceptor {
            io,
            multi_accept,
            exclusive,
            level,
            yield_first: std::cell::Cell::new(false),
        })
    }

    /// Whether the registration is exclusive (for the debug log and tests).
    pub fn is_exclusive(&self) -> bool {
        self.exclusive
    }

    /// The next connection: a nonblocking, close-on-exec fd, and its peer's address as
    /// accept() gave it (`None` for a unix socket's peer): no getpeername() after.
    pub async fn accept(&self) -> io::Result<(OwnedFd, Option<std::net::SocketAddr>)> {
        if self.yield_first.replace(false) {
            // The last call accepted without `multi_accept`: other tasks run before this one.
            tokio::task::yield_now().await;
        }
        loop {
            let mut guard = self.io.readable().await?;
            // SAFETY: all-zero is a valid sockaddr_storage.
            let mut peer: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            // SAFETY: accept4 on a listening fd we keep open, into a storage of `len` bytes.
            let fd = unsafe {
                libc::accept4(
                    self.io.get_ref().as_raw_fd(),
                    (&mut peer as *mut libc::sockaddr_storage).cast(),
                    &mut len,
                    libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                )
            };
            if fd >= 0 {
                // No await between here and the caller's spawn: a graceful stop aborts this
                // task at an await, and a connection accepted must be served, not dropped
                // (nor, as a raw fd, leaked open until the process exits).
                // One per turn. Level-triggered, the readiness goes (epoll says it again
                // while connections wait); edge-triggered, it stays, and the next call yields
                // first.
                if self.level && !self.multi_accept {
                    guard.clear_ready();
                } else {
                    self.yield_first.set(!self.multi_accept);
                }
                // SAFETY: accept4 returned a new fd that nothing else owns.
                return Ok((unsafe { OwnedFd::from_raw_fd(fd) }, inet_addr(&peer)));
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN) => guard.clear_ready(),
                // The peer gave up before we accepted: not an error for anyone.
                Some(libc::ECONNABORTED) | Some(libc::EINTR) => continue,
                _ => return Err(e),
            }
        }
    }
}

/// An IPv4 or IPv6 address as the kernel wrote it (`None` for another family).
fn inet_addr(s: &libc::sockaddr_storage) -> Option<std::net::SocketAddr> {
    use std::net::{SocketAddrV4, SocketAddrV6};
    match libc::c_int::from(s.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let a = unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            Some(
                SocketAddrV4::new(
                    u32::from_be(a.sin_addr.s_addr).into(),
                    u16::from_be(a.sin_port),
                )
                .into(),
            )
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let a = unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            Some(
                SocketAddrV6::new(
                    a.sin6_addr.s6_addr.into(),
                    u16::from_be(a.sin6_port),
                    a.sin6_flowinfo,
                    a.sin6_scope_id,
                )
                .into(),
            )
        }
        _ => None,
    }
}

/// Finds this thread's reactor epoll holding `fd` and re-adds `fd` there level-triggered
/// (with EPOLLEXCLUSIVE when `exclusive`) and the same token.
fn reregister(fd: RawFd, exclusive: bool) -> io::Result<()> {
    let (epfd, data) = find_registration(fd)?;
    let flags = if exclusive {
        libc::EPOLLIN | libc::EPOLLEXCLUSIVE
    } else {
        libc::EPOLLIN
    };
    let mut ev = libc::epoll_event {
        events: flags as u32,
        u64: data,
    };
    // SAFETY: epfd is an epoll instance of this process and fd a valid socket; ev is valid.
    unsafe {
        if libc::epoll_ctl(epfd, libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, &mut ev) != 0 {
            let e = io::Error::last_os_error();
            // Put the plain registration back so tokio keeps working.
            let mut plain = libc::epoll_event {
                events: (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
                u64: data,
            };
            libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, &mut plain);
            return Err(e);
        }
    }
    Ok(())
}

thread_local! {
    /// This worker's reactor epoll fd, once found.
    static REACTOR_EPOLL: std::cell::Cell<Option<RawFd>> = const { std::cell::Cell::new(None) };
}

/// The epoll fd registering `fd` in this thread's reactor, and its token.
fn find_registration(fd: RawFd) -> io::Result<(RawFd, u64)> {
    let candidates: Vec<RawFd> = match REACTOR_EPOLL.with(|c| c.get()) {
        Some(ep) => vec![ep],
        None => epoll_fds()?,
    };
    let mut found: Option<(RawFd, u64)> = None;
    for ep in candidates {
        if let Some(data) = registered_data(ep, fd)? {
            match found {
                // mio keeps a duplicate of its epoll fd (`Registry::try_clone`): one epoll
                // under two numbers is not ambiguous.
                Some((first, _)) if same_epoll(first, ep) => {}
                // Two epolls hold it: ambiguous, do not guess.
                Some(_) => {
                    return Err(io::Error::from(Error::invalid(
                        "listening fd registered in several epolls",
                    )))
                }
                None => found = Some((ep, data)),
            }
        }
    }
    let (ep, data) =
        found.ok_or_else(|| io::Error::from(Error::invalid("reactor epoll not found")))?;
    REACTOR_EPOLL.with(|c| c.set(Some(ep)));
    Ok((ep, data))
}

/// Whether two epoll fds of this process are one epoll instance: kcmp(2) when the kernel (or a
/// seccomp filter) allows it, else the same registrations under both numbers (each worker's
/// listening fd number is its own, so two instances cannot list the same ones).
fn same_epoll(a: RawFd, b: RawFd) -> bool {
    const KCMP_FILE: libc::c_int = 0;
    // SAFETY: getpid has no preconditions; kcmp compares two fds of our own process and
    // touches no memory of ours.
    let r = unsafe {
        let pid = libc::getpid();
        libc::syscall(libc::SYS_kcmp, pid, pid, KCMP_FILE, a, b)
    };
    if r >= 0 {
        return r == 0;
    }
    let tfds = |ep: RawFd| -> Option<Vec<String>> {
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{ep}")).ok()?;
        let mut v: Vec<String> = info
            .lines()
            .filter(|l| l.starts_with("tfd:"))
            .map(str::to_string)
            .collect();
        v.sort();
        Some(v)
    };
    matches!((tfds(a), tfds(b)), (Some(x), Some(y)) if x == y)
}

fn epoll_fds() -> io::Result<Vec<RawFd>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd")? {
        let entry = entry?;
        let Ok(target) = std::fs::read_link(entry.path()) else {
            continue;
        };
        if target.as_os_str() == "anon_inode:[eventpoll]" {
            if let Some(n) = entry.file_name().to_str().and_then(|s| s.parse().ok()) {
                out.push(n);
            }
        }
    }
    Ok(out)
}

/// `tfd: FD events: ... data: TOKEN` in an epoll fd's fdinfo.
fn registered_data(epfd: RawFd, fd: RawFd) -> io::Result<Option<u64>> {
    let info = match std::fs::read_to_string(format!("/proc/self/fdinfo/{epfd}")) {
        Ok(s) => s,
        Err(_) => return Ok(None),
    };
    for line in info.lines() {
        let mut it = line.split_whitespace();
        if it.next() != Some("tfd:") || it.next().and_then(|s| s.parse::<RawFd>().ok()) != Some(fd)
        {
            continue;
        }
        while let Some(tok) = it.next() {
            if tok == "data:" {
                let hex = it.next().unwrap_or("");
                return u64::from_str_radix(hex, 16)
                    .map(Some)
                    .map_err(|_| io::Error::from(Error::invalid("unreadable epoll fdinfo")));
            }
        }
    }
    Ok(None)
}
