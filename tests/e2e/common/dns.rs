//! A DNS server for the resolver's tests: a UDP socket on 127.0.0.1 (and a TCP listener on the
//! same port, for answers too large for a datagram) answering A and AAAA questions from a
//! table, counting the questions it gets. Stopped when dropped.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, TcpListener, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// What the server answers for a name.
#[derive(Clone, Debug)]
pub enum Entry {
    /// These addresses (A and AAAA records as their kind says), with this TTL.
    Addrs(Vec<std::net::IpAddr>, u32),
    /// NXDOMAIN.
    NxDomain,
    /// SERVFAIL.
    ServFail,
    /// No answer at all.
    Silent,
    /// Over UDP an empty answer with TC set; over TCP these addresses.
    Truncated(Vec<std::net::IpAddr>, u32),
    /// These addresses, answered after a while (over UDP).
    Slow(Vec<std::net::IpAddr>, u32, Duration),
}

/// `Entry::Addrs` of one IPv4 address.
pub fn v4(a: &str, ttl: u32) -> Entry {
    Entry::Addrs(vec![a.parse().expect("an IPv4 address")], ttl)
}

struct Shared {
    table: Mutex<HashMap<String, Entry>>,
    /// (name, type, over TCP) of every question, in order.
    asked: Mutex<Vec<(String, u16, bool)>>,
    stop: AtomicBool,
}

pub struct Dns {
    port: u16,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

pub const A: u16 = 1;
pub const AAAA: u16 = 28;

impl Dns {
    pub fn start(table: &[(&str, Entry)]) -> Dns {
        // A UDP port whose TCP twin is free too.
        let (udp, tcp) = loop {
            let u = UdpSocket::bind("127.0.0.1:0").expect("binding a UDP socket");
            let port = u.local_addr().unwrap().port();
            if let Ok(t) = TcpListener::bind(("127.0.0.1", port)) {
                break (u, t);
            }
        };
        let port = udp.local_addr().unwrap().port();
        let shared = Arc::new(Shared {
            table: Mutex::new(
                table
                    .iter()
                    .map(|(n, e)| (n.to_ascii_lowercase(), e.clone()))
                    .collect(),
            ),
            asked: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        });
        udp.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        tcp.set_nonblocking(true).unwrap();
        let sh = shared.clone();
        let u = std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while !sh.stop.load(Ordering::SeqCst) {
                let Ok((n, from)) = udp.recv_from(&mut buf) else {
                    continue;
                };
                let delay = slow(&sh, &buf[..n]);
                if let Some(a) = answer(&sh, &buf[..n], false) {
                    match delay {
                        None => {
                            let _ = udp.send_to(&a, from);
                        }
                        Some(d) => {
                            let sock = udp.try_clone().expect("a clone of the UDP socket");
                            std::thread::spawn(move || {
                                std::thread::sleep(d);
                                let _ = sock.send_to(&a, from);
                            });
                        }
                    }
                }
            }
        });
        let sh = shared.clone();
        let t = std::thread::spawn(move || {
            while !sh.stop.load(Ordering::SeqCst) {
                let Ok((mut s, _)) = tcp.accept() else {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                let mut len = [0u8; 2];
                if s.read_exact(&mut len).is_err() {
                    continue;
                }
                let mut q = vec![0u8; u16::from_be_bytes(len) as usize];
                if s.read_exact(&mut q).is_err() {
                    continue;
                }
                if let Some(a) = answer(&sh, &q, true) {
                    let mut out = (a.len() as u16).to_be_bytes().to_vec();
                    out.extend_from_slice(&a);
                    let _ = s.write_all(&out);
                }
            }
        });
        Dns {
            port,
            shared,
            threads: vec![u, t],
        }
    }

    /// `127.0.0.1:PORT`, for a `resolver` line.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Changes what a name answers.
    pub fn set(&self, name: &str, e: Entry) {
        self.shared
            .table
            .lock()
            .unwrap()
            .insert(name.to_ascii_lowercase(), e);
    }

    /// How many questions of this type (over UDP) were asked about `name`.
    pub fn asked(&self, name: &str, qtype: u16) -> usize {
        self.shared
            .asked
            .lock()
            .unwrap()
            .iter()
            .filter(|(n, t, tcp)| n.eq_ignore_ascii_case(name) && *t == qtype && !tcp)
            .count()
    }

    /// How many questions came over TCP.
    pub fn asked_tcp(&self) -> usize {
        self.shared
            .asked
            .lock()
            .unwrap()
            .iter()
            .filter(|q| q.2)
            .count()
    }
}

impl Drop for Dns {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// How long to wait before answering `q` (an `Entry::Slow` name).
fn slow(sh: &Shared, q: &[u8]) -> Option<Duration> {
    let mut at = 12;
    let mut labels = Vec::new();
    loop {
        let len = *q.get(at)? as usize;
        at += 1;
        if len == 0 {
            break;
        }
        labels.push(String::from_utf8_lossy(q.get(at..at + len)?).into_owned());
        at += len;
    }
    match sh
        .table
        .lock()
        .unwrap()
        .get(&labels.join(".").to_ascii_lowercase())
    {
        Some(Entry::Slow(_, _, d)) => Some(*d),
        _ => None,
    }
}

/// The answer to the query `q`, or `None` to stay silent.
fn answer(sh: &Shared, q: &[u8], tcp: bool) -> Option<Vec<u8>> {
    if q.len() < 12 {
        return None;
    }
    // The question: labels, type, class.
    let mut at = 12;
    let mut labels = Vec::new();
    loop {
        let len = *q.get(at)? as usize;
        at += 1;
        if len == 0 {
            break;
        }
        labels.push(String::from_utf8_lossy(q.get(at..at + len)?).into_owned());
        at += len;
    }
    let qtype = u16::from_be_bytes([*q.get(at)?, *q.get(at + 1)?]);
    let question_end = at + 4;
    let name = labels.join(".");
    sh.asked.lock().unwrap().push((name.clone(), qtype, tcp));
    let entry = sh
        .table
        .lock()
        .unwrap()
        .get(&name.to_ascii_lowercase())
        .cloned();
    let mut out = q.get(..question_end)?.to_vec();
    out[2] = 0x80 | (q[2] & 0x01); // QR, RD echoed
    out[3] = 0x80; // RA
    out[6..12].copy_from_slice(&[0, 0, 0, 0, 0, 0]);
    let addrs = match entry {
        None | Some(Entry::NxDomain) => {
            out[3] |= 3;
            return Some(out);
        }
        Some(Entry::ServFail) => {
            out[3] |= 2;
            return Some(out);
        }
        Some(Entry::Silent) => return None,
        Some(Entry::Truncated(_, _)) if !tcp => {
            out[2] |= 0x02;
            return Some(out);
        }
        Some(Entry::Truncated(a, ttl))
        | Some(Entry::Addrs(a, ttl))
        | Some(Entry::Slow(a, ttl, _)) => (a, ttl),
    };
    let mut count = 0u16;
    for ip in &addrs.0 {
        let (t, data): (u16, Vec<u8>) = match ip {
            std::net::IpAddr::V4(v) => (A, Ipv4Addr::octets(v).to_vec()),
            std::net::IpAddr::V6(v) => (AAAA, Ipv6Addr::octets(v).to_vec()),
        };
        if t != qtype {
            continue;
        }
        out.extend_from_slice(&[0xc0, 12]);
        out.extend_from_slice(&t.to_be_bytes());
        out.extend_from_slice(&1u16.to_be_bytes());
        out.extend_from_slice(&addrs.1.to_be_bytes());
        out.extend_from_slice(&(data.len() as u16).to_be_bytes());
        out.extend_from_slice(&data);
        count += 1;
    }
    out[6..8].copy_from_slice(&count.to_be_bytes());
    Some(out)
}
