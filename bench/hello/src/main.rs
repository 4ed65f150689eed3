//! A hello-world upstream for the proxy benchmarks: raw epoll, HTTP/1.1 keep-alive, cheap.
//!
//! Every request gets `200 OK` with a fixed 14-byte body (`Hello, world!\n`, Content-Length).
//! Unlike bench/canned it reads each request head: it honours `Connection: close` and HTTP/1.0
//! without `keep-alive` (answers `Connection: close`, then closes, as a proxy without upstream
//! keepalive expects), and skips a `Content-Length` body. All answers to one read go out in one
//! write. Chunked request bodies are not supported (answered with 501 and a close): a benchmark
//! upstream, not a server.
//!
//! Usage: hello [PORT [THREADS]]   (default 8092, 1 thread; listens on 127.0.0.1 only; with
//! several threads each has its own SO_REUSEPORT listener and epoll loop)

use std::io::Error;

const BODY: &[u8] = b"Hello, world!\n";
const MAX_EVENTS: usize = 256;
const READ_BUF: usize = 64 * 1024;
const MAX_HEAD: usize = 16 * 1024;
const IN: u32 = (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;

struct Conn {
    /// Bytes read and not yet consumed (a partial head, or the rest of a body to skip).
    input: Vec<u8>,
    /// Body bytes still to skip before the next request head.
    skip: usize,
    /// Answers not yet written (the socket buffer was full).
    pending: Vec<u8>,
    /// The epoll events registered now.
    registered: u32,
    /// Close once `pending` is written.
    closing: bool,
}

fn answer(out: &mut Vec<u8>, close: bool) {
    out.extend_from_slice(b"HTTP/1.1 200 OK\r\nServer: hello\r\nContent-Type: text/plain\r\nContent-Length: ");
    out.extend_from_slice(BODY.len().to_string().as_bytes());
    if close {
        out.extend_from_slice(b"\r\nConnection: close");
    }
    out.extend_from_slice(b"\r\n\r\n");
    out.extend_from_slice(BODY);
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// What one request head asks for.
struct Head {
    close: bool,
    body: Option<usize>,
    chunked: bool,
}

fn parse_head(head: &[u8]) -> Head {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n");
    let http10 = lines.next().is_some_and(|l| l.ends_with("HTTP/1.0"));
    let (mut close, mut keep, mut body, mut chunked) = (false, false, None, false);
    for l in lines {
        let Some((name, value)) = l.split_once(':') else { continue };
        let value = value.trim().to_ascii_lowercase();
        if name.eq_ignore_ascii_case("connection") {
            close |= value.split(',').any(|t| t.trim() == "close");
            keep |= value.split(',').any(|t| t.trim() == "keep-alive");
        } else if name.eq_ignore_ascii_case("content-length") {
            body = value.parse().ok();
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = true;
        }
    }
    Head { close: close || (http10 && !keep), body, chunked }
}

/// Consumes every complete request in `conn.input`, appending the answers to `out`.
fn serve(conn: &mut Conn, out: &mut Vec<u8>) {
    let mut at = 0;
    while !conn.closing {
        if conn.skip > 0 {
            let n = conn.skip.min(conn.input.len() - at);
            conn.skip -= n;
            at += n;
            if conn.skip > 0 {
                break;
            }
        }
        let Some(end) = find(&conn.input[at..], b"\r\n\r\n") else {
            if conn.input.len() - at > MAX_HEAD {
                conn.closing = true;
            }
            break;
        };
        let head = parse_head(&conn.input[at..at + end]);
        at += end + 4;
        if head.chunked {
            out.extend_from_slice(b"HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            conn.closing = true;
            break;
        }
        conn.skip = head.body.unwrap_or(0);
        answer(out, head.close);
        conn.closing = head.close;
    }
    conn.input.drain(..at);
}

fn die(what: &str) -> ! {
    eprintln!("hello: {what}: {}", Error::last_os_error());
    std::process::exit(1);
}

fn errno() -> i32 {
    Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn epoll_ctl(ep: i32, op: i32, fd: i32, events: u32) {
    let mut ev = libc::epoll_event { events, u64: fd as u64 };
    // SAFETY: ep and fd are open descriptors; ev lives across the call.
    if unsafe { libc::epoll_ctl(ep, op, fd, &mut ev) } < 0 {
        die("epoll_ctl");
    }
}

fn listener(port: u16, reuseport: bool) -> i32 {
    // SAFETY: plain socket syscalls on a descriptor created here; the option and address
    // structs outlive the calls that read them.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            die("socket");
        }
        let one: libc::c_int = 1;
        let opt = &one as *const _ as *const libc::c_void;
        libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, opt, 4);
        if reuseport {
            libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, opt, 4);
        }
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr { s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be() },
            sin_zero: [0; 8],
        };
        let len = std::mem::size_of::<libc::sockaddr_in>() as u32;
        if libc::bind(fd, &addr as *const _ as *const libc::sockaddr, len) < 0 {
            die("bind 127.0.0.1");
        }
        if libc::listen(fd, 4096) < 0 {
            die("listen");
        }
        fd
    }
}

fn write_some(fd: i32, buf: &[u8]) -> Result<usize, ()> {
    // SAFETY: buf is a valid slice for its length; fd is an open socket.
    let w = unsafe { libc::write(fd, buf.as_ptr() as *const libc::c_void, buf.len()) };
    if w >= 0 {
        Ok(w as usize)
    } else if errno() == libc::EAGAIN {
        Ok(0)
    } else {
        Err(())
    }
}

fn event_loop(lfd: i32) {
    // SAFETY: creates a new descriptor.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        die("epoll_create1");
    }
    epoll_ctl(ep, libc::EPOLL_CTL_ADD, lfd, libc::EPOLLIN as u32);
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; MAX_EVENTS];
    let mut buf = vec![0u8; READ_BUF];
    let mut out: Vec<u8> = Vec::with_capacity(READ_BUF);
    let one: libc::c_int = 1;
    loop {
        // SAFETY: events has MAX_EVENTS entries.
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), MAX_EVENTS as i32, -1) };
        if n < 0 {
            if errno() == libc::EINTR {
                continue;
            }
            die("epoll_wait");
        }
        for ev in &events[..n as usize] {
            let fd = ev.u64 as i32;
            let flags = ev.events;
            if fd == lfd {
                loop {
                    // SAFETY: accepts on our listener; a new descriptor or -1.
                    let c = unsafe {
                        libc::accept4(lfd, std::ptr::null_mut(), std::ptr::null_mut(), libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC)
                    };
                    if c < 0 {
                        break;
                    }
                    // SAFETY: c is the socket just accepted; `one` outlives the call.
                    unsafe {
                        libc::setsockopt(c, libc::IPPROTO_TCP, libc::TCP_NODELAY, &one as *const _ as *const libc::c_void, 4);
                    }
                    let i = c as usize;
                    if conns.len() <= i {
                        conns.resize_with(i + 1, || None);
                    }
                    conns[i] = Some(Conn { input: Vec::new(), skip: 0, pending: Vec::new(), registered: IN, closing: false });
                    epoll_ctl(ep, libc::EPOLL_CTL_ADD, c, IN);
                }
                continue;
            }
            let Some(conn) = conns.get_mut(fd as usize).and_then(|c| c.as_mut()) else { continue };
            let mut close = flags & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0;
            if !close && flags & libc::EPOLLOUT as u32 != 0 && !conn.pending.is_empty() {
                match write_some(fd, &conn.pending) {
                    Ok(w) => drop(conn.pending.drain(..w)),
                    Err(()) => close = true,
                }
            }
            if !close && !conn.closing && flags & (libc::EPOLLIN | libc::EPOLLRDHUP) as u32 != 0 {
                loop {
                    // SAFETY: buf is valid for its length; fd is an open socket.
                    let r = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
                    if r == 0 {
                        close = true;
                        break;
                    }
                    if r < 0 {
                        close = errno() != libc::EAGAIN;
                        break;
                    }
                    conn.input.extend_from_slice(&buf[..r as usize]);
                    out.clear();
                    serve(conn, &mut out);
                    if !out.is_empty() {
                        if conn.pending.is_empty() {
                            match write_some(fd, &out) {
                                Ok(w) => conn.pending.extend_from_slice(&out[w..]),
                                Err(()) => {
                                    close = true;
                                    break;
                                }
                            }
                        } else {
                            conn.pending.extend_from_slice(&out);
                        }
                    }
                    if conn.closing || (r as usize) < buf.len() {
                        break;
                    }
                }
            }
            if conn.closing && conn.pending.is_empty() {
                close = true;
            }
            if close {
                // SAFETY: fd is ours and is forgotten right after.
                unsafe {
                    libc::epoll_ctl(ep, libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut());
                    libc::close(fd);
                }
                conns[fd as usize] = None;
                continue;
            }
            // While closing, only the rest of the answers matters: stop listening for input
            // (level-triggered EPOLLIN would fire again and again for unread bytes).
            let want = match (conn.closing, conn.pending.is_empty()) {
                (true, _) => libc::EPOLLOUT as u32,
                (false, true) => IN,
                (false, false) => IN | libc::EPOLLOUT as u32,
            };
            if want != conn.registered {
                conn.registered = want;
                epoll_ctl(ep, libc::EPOLL_CTL_MOD, fd, want);
            }
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let port: u16 = args.next().map(|p| p.parse().expect("PORT")).unwrap_or(8092);
    let threads: usize = args.next().map(|t| t.parse().expect("THREADS")).unwrap_or(1).max(1);
    // SAFETY: ignoring SIGPIPE process-wide, before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let fds: Vec<i32> = (0..threads).map(|_| listener(port, threads > 1)).collect();
    let handles: Vec<_> = fds.into_iter().map(|fd| std::thread::spawn(move || event_loop(fd))).collect();
    for h in handles {
        let _ = h.join();
    }
}
