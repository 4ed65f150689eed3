//! A canned-response server: one thread, raw epoll, no HTTP parsing.
//!
//! Every complete request head in the read buffer (counted by its terminating CRLFCRLF) is
//! answered with the same HTTP/1.1 200 response carrying a 612-byte body (the size of nginx's
//! index.html). All answers found in one read go out in one write. This measures what the kernel
//! and the loopback cost per request with nothing else in the way: the floor any real server
//! sits above.
//!
//! Usage: canned [PORT]   (default 8091; listens on 127.0.0.1 only)

use std::io::Write;

const BODY_LEN: usize = 612;
const MAX_EVENTS: usize = 256;
const READ_BUF: usize = 64 * 1024;

struct Conn {
    fd: i32,
    /// How much of a CRLFCRLF the previous read ended in (0..=3).
    matched: usize,
    /// Responses not yet written (when the socket buffer was full).
    pending: Vec<u8>,
    want_write: bool,
}

fn response() -> Vec<u8> {
    let mut body = Vec::with_capacity(BODY_LEN);
    body.extend_from_slice(b"<!DOCTYPE html>\n<html>\n<body>\n<p>canned</p>\n");
    while body.len() < BODY_LEN - 16 {
        body.push(b' ');
    }
    body.extend_from_slice(b"\n</body>\n</html>");
    while body.len() < BODY_LEN {
        body.push(b'\n');
    }
    body.truncate(BODY_LEN);
    let mut r = Vec::new();
    write!(
        r,
        "HTTP/1.1 200 OK\r\nServer: canned\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: keep-alive\r\n\r\n",
        BODY_LEN
    )
    .unwrap();
    r.extend_from_slice(&body);
    r
}

/// Counts request-head terminators (CRLFCRLF) in `buf`, carrying the partial match across
/// reads in `conn.matched` (a tiny KMP automaton for the pattern).
fn count_heads(conn: &mut Conn, buf: &[u8]) -> usize {
    const PAT: &[u8; 4] = b"\r\n\r\n";
    let mut s = conn.matched;
    let mut n = 0;
    for &b in buf {
        if b == PAT[s] {
            s += 1;
            if s == 4 {
                n += 1;
                s = 0;
            }
        } else {
            s = (b == b'\r') as usize;
        }
    }
    conn.matched = s;
    n
}

fn die(what: &str) -> ! {
    eprintln!("canned: {}: {}", what, std::io::Error::last_os_error());
    std::process::exit(1);
}

fn epoll_ctl(ep: i32, op: i32, fd: i32, events: u32) {
    let mut ev = libc::epoll_event { events, u64: fd as u64 };
    if unsafe { libc::epoll_ctl(ep, op, fd, &mut ev) } < 0 {
        die("epoll_ctl");
    }
}

fn main() {
    let port: u16 = std::env::args().nth(1).map(|p| p.parse().expect("port")).unwrap_or(8091);
    let resp = response();
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };

    let lfd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
    if lfd < 0 {
        die("socket");
    }
    let one: libc::c_int = 1;
    unsafe {
        libc::setsockopt(lfd, libc::SOL_SOCKET, libc::SO_REUSEADDR, &one as *const _ as *const libc::c_void, 4);
    }
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be() },
        sin_zero: [0; 8],
    };
    if unsafe { libc::bind(lfd, &addr as *const _ as *const libc::sockaddr, std::mem::size_of::<libc::sockaddr_in>() as u32) } < 0 {
        die("bind");
    }
    if unsafe { libc::listen(lfd, 4096) } < 0 {
        die("listen");
    }

    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        die("epoll_create1");
    }
    epoll_ctl(ep, libc::EPOLL_CTL_ADD, lfd, libc::EPOLLIN as u32);

    // Connections indexed by fd.
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; MAX_EVENTS];
    let mut buf = vec![0u8; READ_BUF];
    let mut out: Vec<u8> = Vec::with_capacity(READ_BUF);

    loop {
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), MAX_EVENTS as i32, -1) };
        if n < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            die("epoll_wait");
        }
        for ev in &events[..n as usize] {
            let fd = ev.u64 as i32;
            let flags = ev.events;
            if fd == lfd {
                loop {
                    let c = unsafe {
                        libc::accept4(lfd, std::ptr::null_mut(), std::ptr::null_mut(), libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC)
                    };
                    if c < 0 {
                        break;
                    }
                    unsafe {
                        libc::setsockopt(c, libc::IPPROTO_TCP, libc::TCP_NODELAY, &one as *const _ as *const libc::c_void, 4);
                    }
                    let i = c as usize;
                    if conns.len() <= i {
                        conns.resize_with(i + 1, || None);
                    }
                    conns[i] = Some(Conn { fd: c, matched: 0, pending: Vec::new(), want_write: false });
                    epoll_ctl(ep, libc::EPOLL_CTL_ADD, c, (libc::EPOLLIN | libc::EPOLLRDHUP) as u32);
                }
                continue;
            }
            let Some(conn) = conns.get_mut(fd as usize).and_then(|c| c.as_mut()) else { continue };
            let mut close = flags & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0;

            if !close && flags & libc::EPOLLOUT as u32 != 0 && !conn.pending.is_empty() {
                let w = unsafe { libc::write(conn.fd, conn.pending.as_ptr() as *const libc::c_void, conn.pending.len()) };
                if w > 0 {
                    conn.pending.drain(..w as usize);
                } else if w < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EAGAIN) {
                    close = true;
                }
            }

            if !close && flags & (libc::EPOLLIN | libc::EPOLLRDHUP) as u32 != 0 {
                loop {
                    let r = unsafe { libc::read(conn.fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
                    if r == 0 {
                        close = true;
                        break;
                    }
                    if r < 0 {
                        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EAGAIN) {
                            close = true;
                        }
                        break;
                    }
                    let heads = count_heads(conn, &buf[..r as usize]);
                    out.clear();
                    for _ in 0..heads {
                        out.extend_from_slice(&resp);
                    }
                    if !out.is_empty() {
                        if conn.pending.is_empty() {
                            let w = unsafe { libc::write(conn.fd, out.as_ptr() as *const libc::c_void, out.len()) };
                            let w = if w < 0 {
                                if std::io::Error::last_os_error().raw_os_error() != Some(libc::EAGAIN) {
                                    close = true;
                                    break;
                                }
                                0
                            } else {
                                w as usize
                            };
                            conn.pending.extend_from_slice(&out[w..]);
                        } else {
                            conn.pending.extend_from_slice(&out);
                        }
                    }
                    if (r as usize) < buf.len() {
                        break;
                    }
                }
            }

            if close {
                unsafe {
                    libc::epoll_ctl(ep, libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut());
                    libc::close(fd);
                }
                conns[fd as usize] = None;
                continue;
            }
            let need_out = !conn.pending.is_empty();
            if need_out != conn.want_write {
                conn.want_write = need_out;
                let mut evs = (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;
                if need_out {
                    evs |= libc::EPOLLOUT as u32;
                }
                epoll_ctl(ep, libc::EPOLL_CTL_MOD, fd, evs);
            }
        }
    }
}
