//! nginx's resolver: names looked up at run time (`proxy_pass` with variables, upstream
//! `server ... resolve`) by asking the DNS servers of a `resolver` directive.
//!
//! - [`wire`]: DNS queries and answers (pure).
//! - [`conf`]: the `resolver` and `resolver_timeout` directives (an http module).
//! - here: [`resolve`], the lookup with its per-worker cache.
//!
//! Runs on the worker and never blocks it: queries go out on a UDP socket of the worker's
//! event loop (TCP when an answer says it was truncated). As nginx's, a lookup asks for A and
//! AAAA records (as `ipv4=`/`ipv6=` allow) from one server, asks the next one when a server
//! refuses the datagram or is silent for 5 seconds (nginx's resend time), and gives up at
//! `resolver_timeout`. Lookups of one name at the same time share one question. Answers are
//! kept per worker for their TTL (or `valid=`), and an error
//! answer for 10 seconds (or `valid=`), as nginx keeps them; a timeout is not kept. Each
//! `resolver` directive has its own cache, as in nginx.

pub mod conf;
pub mod wire;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio::time::Instant;

/// How long nginx waits for a server before it asks the next one (`resend_timeout`).
const RESEND: Duration = Duration::from_secs(5);
/// How long an error answer is kept when `valid=` does not say.
const ERROR_VALID: Duration = Duration::from_secs(10);
/// Names a worker keeps at most; past it, expired ones go (then all, if none had expired).
const CACHE_MAX: usize = 4096;

/// One `resolver` directive.
#[derive(Debug)]
pub struct Resolver {
    /// Unique per directive read: the key of its cache.
    pub id: u64,
    pub servers: Vec<SocketAddr>,
    /// `valid=`: how long answers are kept, whatever their TTL.
    pub valid: Option<Duration>,
    pub ipv4: bool,
    pub ipv6: bool,
}

impl Resolver {
    pub fn new(servers: Vec<SocketAddr>) -> Resolver {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Resolver {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            servers,
            valid: None,
            ipv4: true,
            ipv6: true,
        }
    }
}

/// Why a name could not be resolved: a DNS result code (3: no such name) or 110 (timed
/// out); shown as nginx shows it, `(3: Host not found)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Failure(pub u32);

impl Failure {
    pub const TIMED_OUT: Failure = Failure(110);
    pub const NOT_FOUND: Failure = Failure(3);
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}: {})", self.0, wire::strerror(self.0))
    }
}

/// A cached answer.
struct Cached {
    result: Result<Arc<[IpAddr]>, Failure>,
    until: Instant,
}

thread_local! {
    static CACHE: RefCell<HashMap<(u64, String), Cached>> = RefCell::new(HashMap::new());
    /// Where the next lookup starts among a resolver's servers (nginx turns through them).
    static TURN: Cell<usize> = const { Cell::new(0) };
    /// The names being asked about now, with the lookups waiting for their answers.
    static WAITING: RefCell<HashMap<(u64, String), Vec<Waiter>>> = RefCell::new(HashMap::new());
    static RANDOM: Cell<u64> = Cell::new(seed());
}

fn seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let here = &t as *const u64 as u64;
    (t ^ here.rotate_left(32)) | 1
}

/// A query id nobody on the path can guess easily (xorshift; not cryptographic).
fn random_id() -> u16 {
    RANDOM.with(|r| {
        let mut x = r.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        r.set(x);
        (x >> 24) as u16
    })
}

/// The addresses of `name` (A, then AAAA records), from this worker's cache or asked now,
/// within `timeout`. The name is looked up as written (lower-cased for the cache).
pub async fn resolve(
    r: &Resolver,
    name: &str,
    timeout: Duration,
) -> Result<Arc<[IpAddr]>, Failure> {
    let key = (r.id, name.to_ascii_lowercase());
    let now = Instant::now();
    let hit = CACHE.with(|c| {
        c.borrow()
            .get(&key)
            .filter(|e| e.until > now)
            .map(|e| e.result.clone())
    });
    if let Some(result) = hit {
        return result.map(|a| rotated(&a));
    }
    // One question at a time per name: a request that comes while it is asked waits for its
    // answer (as nginx's waiting list), and asks itself if the asker went away.
    let waiting = WAITING.with(|w| {
        let mut w = w.borrow_mut();
        match w.get_mut(&key) {
            Some(list) => {
                let (tx, rx) = tokio::sync::oneshot::channel();
                list.push(tx);
                Some(rx)
            }
            None => {
                w.insert(key.clone(), Vec::new());
                None
            }
        }
    });
    if let Some(rx) = waiting {
        if let Ok(Ok(result)) = tokio::time::timeout(timeout, rx).await {
            return result.map(|a| rotated(&a));
        }
        return lookup(r, name, Instant::now() + timeout)
            .await
            .map(|(a, _)| Arc::<[IpAddr]>::from(a));
    }
    let asking = Asking(Some(key.clone()));
    let result = lookup(r, name, now + timeout).await;
    let keep = match &result {
        Ok((_, ttl)) => Some(r.valid.unwrap_or(Duration::from_secs(u64::from(*ttl)))),
        Err(f) if *f == Failure::TIMED_OUT => None,
        Err(_) => Some(r.valid.unwrap_or(ERROR_VALID)),
    };
    let result = result.map(|(addrs, _)| Arc::<[IpAddr]>::from(addrs));
    // nginx starts a name's peers at a random one of its addresses.
    let result = result.map(|a| rotated(&a));
    if let Some(keep) = keep.filter(|k| !k.is_zero()) {
        CACHE.with(|c| {
            let mut c = c.borrow_mut();
            if c.len() >= CACHE_MAX {
                let now = Instant::now();
                c.retain(|_, e| e.until > now);
                if c.len() >= CACHE_MAX {
                    c.clear();
                }
            }
            c.insert(
                key,
                Cached {
                    result: result.clone(),
                    until: Instant::now() + keep,
                },
            );
        });
    }
    for tx in asking.done() {
        let _ = tx.send(result.clone());
    }
    result
}

type Waiter = tokio::sync::oneshot::Sender<Result<Arc<[IpAddr]>, Failure>>;

/// The name a lookup is asking about: its waiters are told the answer when it is done, and
/// let go (to ask themselves) if the lookup is dropped first.
struct Asking(Option<(u64, String)>);

impl Asking {
    fn done(mut self) -> Vec<Waiter> {
        let key = self.0.take().expect("taken once");
        WAITING.with(|w| w.borrow_mut().remove(&key).unwrap_or_default())
    }
}

impl Drop for Asking {
    fn drop(&mut self) {
        if let Some(key) = self.0.take() {
            // Dropping the senders wakes the waiters.
            WAITING.with(|w| w.borrow_mut().remove(&key));
        }
    }
}

/// The addresses from a random one on (nginx's `ngx_resolver_export` with `rotate`).
fn rotated(addrs: &Arc<[IpAddr]>) -> Arc<[IpAddr]> {
    if addrs.len() < 2 {
        return addrs.clone();
    }
    let at = random_id() as usize % addrs.len();
    addrs[at..].iter().chain(&addrs[..at]).copied().collect()
}

/// Asks the servers in turn until one answers or `deadline` passes: the addresses and the
/// smallest TTL.
async fn lookup(
    r: &Resolver,
    name: &str,
    deadline: Instant,
) -> Result<(Vec<IpAddr>, u32), Failure> {
    let mut types = Vec::with_capacity(2);
    if r.ipv4 {
        types.push(wire::TYPE_A);
    }
    if r.ipv6 {
        types.push(wire::TYPE_AAAA);
    }
    if r.servers.is_empty() || types.is_empty() {
        return Err(Failure::TIMED_OUT);
    }
    let start = TURN.with(|t| {
        let s = t.get();
        t.set(s.wrapping_add(1));
        s
    });
    let mut i = start;
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Err(Failure::TIMED_OUT);
        }
        let server = r.servers[i % r.servers.len()];
        let until = deadline.min(now + RESEND);
        match ask(server, name, &types, until).await {
            Asked::Answered(answers) => return combine(&answers),
            Asked::Refused => {
                // Not too fast around a list of servers that all refuse.
                if (i + 1 - start) % r.servers.len() == 0 {
                    tokio::time::sleep_until(
                        until.min(Instant::now() + Duration::from_millis(200)),
                    )
                    .await;
                }
            }
            Asked::Silent => {}
        }
        i += 1;
    }
}

enum Asked {
    Answered(Vec<wire::Answer>),
    /// The server's port is closed (an ICMP error came back): the next server, now.
    Refused,
    /// No answer in time.
    Silent,
}

/// One round with one server: every type asked on one socket, answers awaited until `until`.
async fn ask(server: SocketAddr, name: &str, types: &[u16], until: Instant) -> Asked {
    let local: SocketAddr = match server {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let Ok(sock) = UdpSocket::bind(local).await else {
        return Asked::Silent;
    };
    if sock.connect(server).await.is_err() {
        return Asked::Refused;
    }
    let mut pending: Vec<(u16, u16, Option<wire::Answer>)> = Vec::with_capacity(types.len());
    for &t in types {
        let id = random_id();
        let Some(q) = wire::query(id, name, t) else {
            // A name DNS cannot carry has no address.
            return Asked::Answered(vec![wire::Answer {
                rcode: 3,
                truncated: false,
                addrs: Vec::new(),
                ttl: None,
            }]);
        };
        if let Err(e) = sock.send(&q).await {
            return refused_or_silent(&e);
        }
        pending.push((id, t, None));
    }
    let mut buf = vec![0u8; 4096];
    while pending.iter().any(|p| p.2.is_none()) {
        let n = match tokio::time::timeout_at(until, sock.recv(&mut buf)).await {
            Err(_) => return Asked::Silent,
            Ok(Err(e)) => return refused_or_silent(&e),
            Ok(Ok(n)) => n,
        };
        for p in pending.iter_mut().filter(|p| p.2.is_none()) {
            match wire::parse(&buf[..n], p.0, name, p.1) {
                Ok(a) if a.truncated => match ask_tcp(server, name, p.1, until).await {
                    Some(a) => p.2 = Some(a),
                    None => return Asked::Silent,
                },
                Ok(a) => p.2 = Some(a),
                Err(_) => continue,
            }
            break;
        }
    }
    Asked::Answered(pending.into_iter().filter_map(|p| p.2).collect())
}

fn refused_or_silent(e: &std::io::Error) -> Asked {
    if e.kind() == std::io::ErrorKind::ConnectionRefused {
        Asked::Refused
    } else {
        Asked::Silent
    }
}

/// The same question over TCP (an answer too large for a datagram).
async fn ask_tcp(
    server: SocketAddr,
    name: &str,
    qtype: u16,
    until: Instant,
) -> Option<wire::Answer> {
    let id = random_id();
    let q = wire::query(id, name, qtype)?;
    let exchange = async {
        let mut s = TcpStream::connect(server).await.ok()?;
        let mut msg = Vec::with_capacity(q.len() + 2);
        msg.extend_from_slice(&(q.len() as u16).to_be_bytes());
        msg.extend_from_slice(&q);
        s.write_all(&msg).await.ok()?;
        let mut len = [0u8; 2];
        s.read_exact(&mut len).await.ok()?;
        let mut buf = vec![0u8; u16::from_be_bytes(len) as usize];
        s.read_exact(&mut buf).await.ok()?;
        wire::parse(&buf, id, name, qtype).ok()
    };
    tokio::time::timeout_at(until, exchange)
        .await
        .ok()
        .flatten()
}

/// The answers of one round as one result: the addresses of every type (A first), or the
/// first error; an answer without addresses is "Host not found", as in nginx.
fn combine(answers: &[wire::Answer]) -> Result<(Vec<IpAddr>, u32), Failure> {
    let mut addrs = Vec::new();
    let mut ttl: Option<u32> = None;
    let mut error = None;
    for a in answers {
        if a.rcode != 0 {
            error.get_or_insert(Failure(u32::from(a.rcode)));
            continue;
        }
        addrs.extend_from_slice(&a.addrs);
        if let Some(t) = a.ttl {
            ttl = Some(ttl.map_or(t, |x| x.min(t)));
        }
    }
    if addrs.is_empty() {
        return Err(error.unwrap_or(Failure::NOT_FOUND));
    }
    Ok((addrs, ttl.unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(rcode: u8, addrs: &[&str], ttl: u32) -> wire::Answer {
        wire::Answer {
            rcode,
            truncated: false,
            addrs: addrs.iter().map(|a| a.parse().unwrap()).collect(),
            ttl: (!addrs.is_empty()).then_some(ttl),
        }
    }

    #[test]
    fn answers_combine_as_nginx_reads_them() {
        let both = combine(&[answer(0, &["127.0.0.2"], 30), answer(0, &["::1"], 5)]).unwrap();
        assert_eq!(both.0.len(), 2);
        assert_eq!(both.1, 5);
        assert_eq!(
            combine(&[answer(3, &[], 0), answer(3, &[], 0)]),
            Err(Failure(3))
        );
        assert_eq!(combine(&[answer(0, &[], 0)]), Err(Failure::NOT_FOUND));
        assert_eq!(combine(&[answer(2, &[], 0)]), Err(Failure(2)));
        assert_eq!(
            combine(&[answer(0, &["127.0.0.2"], 30), answer(2, &[], 0)])
                .unwrap()
                .0
                .len(),
            1
        );
        assert_eq!(Failure(3).to_string(), "(3: Host not found)");
        assert_eq!(Failure::TIMED_OUT.to_string(), "(110: Operation timed out)");
    }
}
