//! Parked keep-alive connections: one that waited a whole sweep interval for its next request
//! (`IdleWakers::sweep`, every `PARK_SWEEP`) gives up its task.
//!
//! A connection's task is sized by the deepest state of its request (kilobytes: the phases, a
//! static file's or a proxied answer's futures, laid out inline so a request costs no
//! allocation). While a connection waits for a request it needs none of that. So after a while
//! its task ends, and the connection (its socket and place in the worker's idle list, nothing
//! else) goes into its worker's parked set: an epoll instance of its own, with every parked
//! socket in it, polled by one task. A plain socket leaves the worker's reactor meanwhile (its
//! registration is a quarter of a kilobyte), and the connection's timer is dropped (the set
//! keeps its deadline). nginx, too, keeps nothing but the connection and its event while it
//! waits (it frees a keep-alive connection's buffers).
//!
//! The set's task gives a connection back a task of its own (`drive`, which goes on from the
//! wait it left) when its socket has input, when a graceful stop, a reload or a new client that
//! needs room wakes the worker's idle list, or when its `keepalive_timeout` has passed (checked
//! every `PARK_SWEEP`; the connection's own wait then closes it as it would have). A connection
//! that keeps sending never parks, so its requests cost nothing more.
//!
//! An idle HTTP/2 connection parks here too (`http/h2/drive.rs`): its codec and what its
//! streams share stay, its task (a kilobyte) and its socket's registration go.

use std::cell::RefCell;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use super::Conn;
use crate::http::transport::Transport;
use crate::log::Level;
use crate::tls::TlsConn;
use crate::worker::{IdleWakers, PARK_SWEEP};

/// Ready sockets taken from the set's epoll per call.
const EVENTS: usize = 64;

/// One worker's parked connections.
struct Set {
    /// The epoll instance holding the parked sockets (each with its index in `conns`),
    /// itself registered with the worker's reactor.
    ep: AsyncFd<OwnedFd>,
    conns: RefCell<Vec<Option<Parked>>>,
    free: RefCell<Vec<usize>>,
    /// The worker's idle list (its wakes reach the set's task).
    wakers: Rc<IdleWakers>,
    /// Connections parked since the set last had the allocator give freed memory back.
    parked_since_release: std::cell::Cell<usize>,
}

/// After this many connections parked (their tasks, kilobytes each, freed), the set's next
/// sweep has the allocator give the freed memory back to the system (`spare::release_freed`):
/// else it holds it, and an idle worker's RSS shows tasks that no longer exist.
/// (A release costs 30–160 µs here with ~1,000 parked; at most one per `RELEASE_EVERY`.)
const RELEASE_AFTER: usize = 64;
const RELEASE_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// A parked connection: HTTP/1's (without its timer) or HTTP/2's (its socket and what its
/// loop keeps).
enum Guest {
    H1(Box<Conn<Socket, ()>>),
    H2(Box<(Socket, crate::http::h2::Kept)>),
}

impl Guest {
    fn fd(&self) -> RawFd {
        match self {
            Guest::H1(c) => c.stream.fd(),
            Guest::H2(c) => c.0.fd(),
        }
    }

    fn idle_slot(&self) -> &crate::worker::IdleSlot {
        match self {
            Guest::H1(c) => &c.idle_slot,
            Guest::H2(c) => &c.1.idle_slot,
        }
    }
}

/// A parked connection and what its wait was.
struct Parked {
    conn: Guest,
    /// Its `keepalive_timeout` deadline.
    deadline: Instant,
    /// The epoch of the worker's idle list its wait began in: a wake since ends it.
    since: u64,
    scope: Option<std::sync::Arc<crate::log::ErrorLog>>,
}

thread_local! {
    /// This worker's set, made at its first park (workers are threads).
    static SET: RefCell<Option<Rc<Set>>> = const { RefCell::new(None) };
}

/// A parked connection's socket: a plain one out of the worker's reactor; a TLS one as it was
/// (it parks with no decrypted byte waiting, see `read.rs`; its state is kilobytes anyway).
enum Socket {
    Tcp(std::net::TcpStream),
    Unix(UnixStream),
    Tls(Box<TlsConn>),
}

impl Socket {
    /// Takes a connection's socket out of the worker's reactor. (On an error it is closed.)
    fn detach(t: Transport) -> std::io::Result<Socket> {
        Ok(match t {
            Transport::Tcp(s) => Socket::Tcp(s.into_std()?),
            Transport::Unix(s) => Socket::Unix(s.into_std()?),
            Transport::Tls(t) => Socket::Tls(t),
        })
    }

    /// Registers the socket with the worker's reactor again. (On an error it is closed.)
    fn attach(self) -> std::io::Result<Transport> {
        Ok(match self {
            Socket::Tcp(s) => Transport::Tcp(tokio::net::TcpStream::from_std(s)?),
            Socket::Unix(s) => Transport::Unix(tokio::net::UnixStream::from_std(s)?),
            Socket::Tls(t) => Transport::Tls(t),
        })
    }

    /// The socket the set's epoll watches (a TLS connection's TCP socket).
    fn fd(&self) -> RawFd {
        match self {
            Socket::Tcp(s) => s.as_raw_fd(),
            Socket::Unix(s) => s.as_raw_fd(),
            Socket::Tls(t) => t.tcp().as_raw_fd(),
        }
    }
}

/// The same connection with another socket and timer (the rest of it moved, not copied
/// field by field elsewhere). When `stream` fails, the connection closes: its socket went with
/// the error, and the rest is dropped here.
fn rehouse<S, T, S2, T2>(
    conn: Conn<S, T>,
    stream: impl FnOnce(S) -> std::io::Result<S2>,
    timer: T2,
) -> std::io::Result<Conn<S2, T2>> {
    // (Every other field moved as it is: named once here.)
    macro_rules! moved {
        ($($field:ident),* $(,)?) => {{
            let Conn { stream: s, timer: _, $($field),* } = conn;
            Ok(Conn { stream: stream(s)?, timer, $($field),* })
        }};
    }
    moved!(
        info,
        buf,
        out,
        generation,
        route,
        guard,
        requests,
        born,
        rules,
        since_yield,
        idle_slot,
        closing_after_request,
        state,
        unread_body,
        unread_input,
        tls_address,
        refuse_with,
        sni,
        keepalive,
        pacing,
        pipelined_next,
        parking,
        resume_deadline,
    )
}

/// Parks `conn` until input, a wake of the idle list from the epoch `since` on, or `deadline`.
/// When it cannot (no epoll), it goes on in a task of its own at once.
pub(super) fn park(conn: Box<Conn>, deadline: Instant, since: u64) {
    let scope = crate::log::scope();
    forget_task(&conn.stream, &conn.idle_slot);
    let number = conn.info.number;
    let conn = match rehouse(*conn, Socket::detach, ()) {
        Ok(conn) => Box::new(conn),
        Err(e) => {
            crate::conn_log!(Level::Alert, number, "epoll_ctl() failed ({e})");
            return;
        }
    };
    let wakers = conn.guard.0.wake_idle.clone();
    enter(
        Parked {
            conn: Guest::H1(conn),
            deadline,
            since,
            scope,
        },
        wakers,
    );
}

/// Parks an idle HTTP/2 connection, as [`park`] (its task has ended; the caller dropped its
/// own wakers).
pub(crate) fn park_h2(t: Transport, kept: crate::http::h2::Kept, deadline: Instant, since: u64) {
    let scope = crate::log::scope();
    forget_task(&t, &kept.idle_slot);
    let socket = match Socket::detach(t) {
        Ok(s) => s,
        Err(e) => {
            crate::conn_log!(Level::Alert, kept.number(), "epoll_ctl() failed ({e})");
            return;
        }
    };
    let wakers = kept.wake_idle();
    enter(
        Parked {
            conn: Guest::H2(Box::new((socket, kept))),
            deadline,
            since,
            scope,
        },
        wakers,
    );
}

/// Puts a connection in its worker's set (made at the first park, with its task).
fn enter(parked: Parked, wakers: Rc<IdleWakers>) {
    let set = match SET.with(|s| s.borrow().clone()) {
        Some(set) => set,
        None => match Set::new(wakers) {
            Ok(set) => {
                SET.with(|s| *s.borrow_mut() = Some(set.clone()));
                tokio::task::spawn_local(serve(set.clone()));
                set
            }
            Err(e) => {
                crate::error_log!(Level::Alert, "epoll_create1() failed ({e})");
                resume(parked);
                return;
            }
        },
    };
    if let Err((parked, e)) = set.add(parked) {
        crate::error_log!(Level::Alert, "epoll_ctl() failed ({e})");
        resume(parked);
    }
}

/// Drops every waker of the ended task that the connection's socket (a TLS one: it stays in
/// the reactor) and idle slot still hold: each keeps the task's memory, kilobytes, alive.
/// (Polled with a waker that does nothing, each keeps that one instead.)
fn forget_task(stream: &Transport, idle_slot: &crate::worker::IdleSlot) {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    if let Transport::Tls(_) = stream {
        let _ = stream.poll_read_ready(&mut cx);
        let _ = stream.poll_write_ready(&mut cx);
    }
    idle_slot.forget_waker();
}

/// Gives a parked connection a task of its own again, going on from the wait it left.
fn resume(p: Parked) {
    let conn = match p.conn {
        Guest::H1(conn) => conn,
        Guest::H2(c) => {
            let (socket, kept) = *c;
            let number = kept.number();
            match socket.attach() {
                Ok(t) => {
                    let slot = &kept.idle_slot;
                    slot.set_parked(false);
                    // (As below.)
                    slot.set_reusable(false);
                    slot.take_park();
                    let task = crate::http::h2::resume(t, kept, p.since);
                    tokio::task::spawn_local(crate::log::scoped_in(p.scope, task));
                }
                Err(e) => crate::conn_log!(Level::Alert, number, "epoll_ctl() failed ({e})"),
            }
            return;
        }
    };
    let number = conn.info.number;
    let mut conn = match rehouse(*conn, Socket::attach, super::new_timer()) {
        Ok(conn) => Box::new(conn),
        Err(e) => {
            crate::conn_log!(Level::Alert, number, "epoll_ctl() failed ({e})");
            return;
        }
    };
    conn.idle_slot.set_parked(false);
    // Its wait starts again with a ticket of its own, and no sweep's ask left from before: a
    // sweep between now and its task's first turn would send it straight back (and one whose
    // deadline passed would go back and forth instead of closing).
    conn.idle_slot.set_reusable(false);
    conn.idle_slot.take_park();
    conn.resume_deadline = Some(p.deadline);
    // (Boxed as at the accept: `pinned::pin_in_place`.)
    let task = crate::pinned::pin_in_place(|| super::drive(conn));
    tokio::task::spawn_local(crate::log::scoped_in(p.scope, task));
}

impl Set {
    fn new(wakers: Rc<IdleWakers>) -> std::io::Result<Rc<Set>> {
        // SAFETY: epoll_create1 has no memory arguments; a non-negative result is a new fd.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: the fd was just made and nothing else owns it.
        let ep = unsafe {
            AsyncFd::register_with_interest(OwnedFd::from_raw_fd(fd), Interest::READABLE)
        }
        .map_err(|e| e.into_parts().1)?;
        Ok(Rc::new(Set {
            ep,
            conns: RefCell::new(Vec::new()),
            free: RefCell::new(Vec::new()),
            wakers,
            parked_since_release: std::cell::Cell::new(0),
        }))
    }

    fn add(&self, p: Parked) -> Result<(), (Parked, std::io::Error)> {
        let fd = p.conn.fd();
        let index = self.free.borrow_mut().pop().unwrap_or_else(|| {
            let mut conns = self.conns.borrow_mut();
            conns.push(None);
            conns.len() - 1
        });
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLRDHUP) as u32,
            u64: index as u64,
        };
        // SAFETY: both fds are open (the socket is the parked connection's, kept until it
        // leaves the set); `ev` is a valid event.
        if unsafe { libc::epoll_ctl(self.ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
            self.free.borrow_mut().push(index);
            return Err((p, std::io::Error::last_os_error()));
        }
        p.conn.idle_slot().set_parked(true);
        self.conns.borrow_mut()[index] = Some(p);
        self.parked_since_release
            .set(self.parked_since_release.get() + 1);
        Ok(())
    }

    /// Takes connection `index` out of the set (and its socket out of the epoll).
    fn remove(&self, index: usize) -> Option<Parked> {
        let p = self.conns.borrow_mut().get_mut(index)?.take()?;
        let fd = p.conn.fd();
        // SAFETY: both fds are open; a null event is allowed for EPOLL_CTL_DEL.
        unsafe {
            libc::epoll_ctl(
                self.ep.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd,
                std::ptr::null_mut(),
            )
        };
        self.free.borrow_mut().push(index);
        Some(p)
    }

    /// The indices of the parked sockets with input (or an end), from the set's epoll.
    fn ready(&self, cx: &mut Context<'_>, out: &mut Vec<usize>) {
        while let Poll::Ready(Ok(mut guard)) = self.ep.poll_read_ready(cx) {
            let mut events = [libc::epoll_event { events: 0, u64: 0 }; EVENTS];
            // SAFETY: `events` has room for EVENTS entries; a zero timeout never blocks.
            let n = unsafe {
                libc::epoll_wait(self.ep.as_raw_fd(), events.as_mut_ptr(), EVENTS as i32, 0)
            };
            if n <= 0 {
                guard.clear_ready();
                continue;
            }
            out.extend(events[..n as usize].iter().map(|e| e.u64 as usize));
            if (n as usize) < EVENTS {
                guard.clear_ready();
            }
            // (Else the set has more: the readiness stays, and the next turn takes them.)
            return;
        }
    }

    /// The parked connections a wake of the idle list (since they parked), a reuse, or their
    /// deadline ends.
    fn ended(&self, now: Instant, out: &mut Vec<usize>) {
        let epoch = self.wakers.epoch();
        for (i, p) in self.conns.borrow().iter().enumerate() {
            let Some(p) = p else { continue };
            if p.since != epoch || p.conn.idle_slot().reused() || now >= p.deadline {
                out.push(i);
            }
        }
    }
}

/// The set's task: gives parked connections their tasks back as they are woken.
async fn serve(set: Rc<Set>) {
    let mut tick = tokio::time::interval(PARK_SWEEP);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut chosen = Vec::new();
    let mut scan = false;
    let mut last_release = Instant::now();
    loop {
        std::future::poll_fn(|cx| {
            set.wakers.register_parked(cx.waker());
            // Deadlines, every sweep; a wake of the idle list or a reuse, when they come.
            if tick.poll_tick(cx).is_ready() | set.wakers.take_parked_woken() {
                scan = true;
            }
            set.ready(cx, &mut chosen);
            if scan || !chosen.is_empty() {
                return Poll::Ready(());
            }
            Poll::Pending
        })
        .await;
        if std::mem::take(&mut scan) {
            set.ended(Instant::now(), &mut chosen);
            if set.parked_since_release.get() >= RELEASE_AFTER
                && last_release.elapsed() >= RELEASE_EVERY
            {
                set.parked_since_release.set(0);
                last_release = Instant::now();
                crate::spare::release_freed();
            }
        }
        for i in chosen.drain(..) {
            if let Some(p) = set.remove(i) {
                resume(p);
            }
        }
    }
}
#[cfg(test)]
mod tests {
    /// A parked connection holds less than a live one: no registration in the reactor (its
    /// socket is a plain fd) and no timer; its `Conn` fits mimalloc's 448-byte bin.
    #[test]
    fn a_parked_connection_is_smaller_than_a_live_one() {
        use std::mem::size_of;
        let parked = size_of::<super::Conn<super::Socket, ()>>();
        assert!(parked < size_of::<super::Conn>(), "{parked}");
        assert!(parked <= 448, "{parked}");
        assert!(size_of::<super::Socket>() <= 16);
    }
}
