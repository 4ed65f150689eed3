//! TLS session resumption: the session cache (`ssl_session_cache`) and session tickets
//! (`ssl_session_tickets`, `ssl_session_ticket_key`).
//!
//! A `shared:NAME:SIZE` zone is one [`SessionZone`] for every worker (workers are threads),
//! bounded as nginx's (about 4000 sessions a megabyte) with least-recently-used eviction, and
//! usable by several servers: each server's entries carry its own context, so a session is only
//! resumed by the server that made it. Zones are kept by name across reloads while a
//! configuration still holds them, as nginx keeps its shared memory. `builtin` is a zone of
//! its own per server (OpenSSL's is per worker process; here the threads share it).
//!
//! Tickets follow nginx's key files: 48 bytes (16 name, 16 HMAC-SHA256 secret, 16 AES-128 key)
//! or 80 bytes (16, 32, 32 with AES-256); the first key encrypts, every key decrypts. Without
//! files, a random key (kept in the shared zone when there is one, so workers and reloads agree).
//! A ticket is `name | IV | AES-CBC(issued-at | state) | HMAC(name | IV | ciphertext)`, and is
//! refused once older than `ssl_session_timeout`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::hmac;
use rustls::server::{ProducesTickets, StoresServerSessions};
use shoal_io::shm::{self, lru, Shared};

use crate::error::Error;
use crate::http::limit_zone::now_ms;
/// nginx's smallest zone: eight pages.
pub const MIN_ZONE_SIZE: usize = 8 * 4096;

/// nginx: "one megabyte of the cache contains about 4000 sessions".
const SESSIONS_PER_MB: usize = 4000;

/// nginx does not cache a session larger than this.
const MAX_SESSION_SIZE: usize = 4096;

/// A bounded map of sessions with expiry, in memory shared across `fork()` (the root master
/// makes it; every child, of this configuration and the next, finds the same sessions).
///
/// As nginx's cache: sessions go out oldest first (a lookup does not refresh one), when the
/// zone holds its count or its bytes are needed. The bytes are a ring: a session is written
/// after the last one, and the oldest sessions whose bytes the write reaches are dropped first,
/// so every session the table holds is whole.
pub struct SessionZone {
    pub name: String,
    pub size: usize,
    capacity: usize,
    table: lru::Table<Entry>,
    ids: lru::Ids,
    /// The next byte written, counted from the zone's start (never wrapped).
    ring: Shared<shm::Mutex<u64>>,
    bytes: *mut u8,
    ring_len: usize,
    /// The ticket key of servers that use this zone and name no key file.
    ticket_key: OnceLock<TicketKey>,
}

// SAFETY: `bytes` is read and written only with `ring`'s lock held.
unsafe impl Send for SessionZone {}
unsafe impl Sync for SessionZone {}

impl std::fmt::Debug for SessionZone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionZone")
            .field("name", &self.name)
            .field("size", &self.size)
            .field("capacity", &self.capacity)
            .finish()
    }
}

/// Where a session's bytes are, and until when it may be resumed.
#[derive(Clone, Copy, Debug)]
struct Entry {
    pos: u64,
    len: u32,
    /// On the system's monotonic clock, in milliseconds (the same in every process).
    expires: u64,
}

// SAFETY: numbers (a place in the ring, not a pointer).
unsafe impl shm::Plain for Entry {}

impl SessionZone {
    /// A zone of `size` bytes (`shared:NAME:SIZE`).
    pub fn shared(name: &str, size: usize) -> Result<SessionZone, Error> {
        let capacity = (size * SESSIONS_PER_MB / (1024 * 1024)).max(1);
        Self::with_capacity(name, size, capacity, size.max(MAX_SESSION_SIZE))
    }

    /// A zone holding `sessions` sessions (`builtin:N`).
    pub fn builtin(sessions: usize) -> Result<SessionZone, Error> {
        let sessions = sessions.max(1);
        Self::with_capacity("", 0, sessions, (sessions * 512).max(MAX_SESSION_SIZE))
    }

    fn with_capacity(
        name: &str,
        size: usize,
        capacity: usize,
        ring_len: usize,
    ) -> Result<SessionZone, Error> {
        let capacity = capacity.min(u32::MAX as usize / 4);
        let bytes = lru::Table::<Entry>::bytes(capacity as u32) + ring_len + 256;
        let shown = if name.is_empty() { "builtin" } else { name };
        // (nginx's words when its zone cannot be mapped: the configuration fails.)
        let region = shm::Region::new(shown, bytes)
            .map_err(|e| Error::failed(format_args!("mmap(MAP_ANON|MAP_SHARED, {bytes})"), e))?;
        let mut carver = shm::Carver::new(region);
        let table = lru::Table::new(&mut carver, capacity as u32);
        let ring = carver.mutex(0u64);
        let bytes = carver.zeroed_array::<u8>(ring_len);
        Ok(SessionZone {
            name: name.to_string(),
            size,
            capacity,
            table,
            ids: lru::Ids::new(),
            ring,
            bytes,
            ring_len,
            ticket_key: OnceLock::new(),
        })
    }

    /// How many sessions the zone holds at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// How many it holds now.
    pub fn len(&self) -> usize {
        let _ring = self.ring.lock();
        self.table.lock(&self.ids).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn put(&self, key: Vec<u8>, value: Vec<u8>, ttl: Duration) -> bool {
        if value.len() > MAX_SESSION_SIZE {
            return false;
        }
        let expires = now_ms().saturating_add(ttl.as_millis() as u64);
        let mut next = self.ring.lock();
        let mut t = self.table.lock(&self.ids);
        t.remove(&key);
        let pos = *next;
        let end = pos + value.len() as u64;
        // What the write reaches, and what the count has no room for, goes: the oldest first.
        let kept_from = end.saturating_sub(self.ring_len as u64);
        while let Some((_, e)) = t.oldest() {
            if e.pos >= kept_from && t.len() < self.capacity {
                break;
            }
            t.pop_oldest();
        }
        // SAFETY: the ring's bytes, only ever touched with its lock held (held here).
        let ring = unsafe { std::slice::from_raw_parts_mut(self.bytes, self.ring_len) };
        let at = (pos % self.ring_len as u64) as usize;
        let (first, wrapped) = value.split_at(value.len().min(self.ring_len - at));
        ring[at..at + first.len()].copy_from_slice(first);
        ring[..wrapped.len()].copy_from_slice(wrapped);
        *next = end;
        let entry = Entry {
            pos,
            len: value.len() as u32,
            expires,
        };
        t.insert(&key, entry)
    }

    fn get(&self, key: &[u8], take: bool) -> Option<Vec<u8>> {
        let _ring = self.ring.lock();
        let mut t = self.table.lock(&self.ids);
        let e = *t.peek_mut(key)?;
        let expired = e.expires <= now_ms();
        if expired || take {
            t.remove(key);
            if expired {
                return None;
            }
        }
        // SAFETY: the ring's bytes, read with its lock held; the table holds only sessions
        // whose bytes no later write reached.
        let ring = unsafe { std::slice::from_raw_parts(self.bytes, self.ring_len) };
        let at = (e.pos % self.ring_len as u64) as usize;
        let len = e.len as usize;
        let first = len.min(self.ring_len - at);
        let mut value = Vec::with_capacity(len);
        value.extend_from_slice(&ring[at..at + first]);
        value.extend_from_slice(&ring[..len - first]);
        Some(value)
    }

    /// The zone's random ticket key, made on first use.
    fn ticket_key(&self) -> TicketKey {
        self.ticket_key.get_or_init(TicketKey::random).clone()
    }
}

/// The zones of the running configurations, by name: a reload that names a zone again with
/// the same size keeps its sessions.
fn zones() -> &'static Mutex<HashMap<String, Weak<SessionZone>>> {
    static ZONES: OnceLock<Mutex<HashMap<String, Weak<SessionZone>>>> = OnceLock::new();
    ZONES.get_or_init(Default::default)
}

/// The zone `shared:NAME:SIZE`: the live one of that name and size, or a new one.
pub fn shared_zone(name: &str, size: usize) -> Result<Arc<SessionZone>, Error> {
    let mut map = zones().lock().unwrap_or_else(|e| e.into_inner());
    map.retain(|_, z| z.strong_count() > 0);
    if let Some(z) = map.get(name).and_then(Weak::upgrade) {
        if z.size == size {
            return Ok(z);
        }
    }
    let z = Arc::new(SessionZone::shared(name, size)?);
    map.insert(name.to_string(), Arc::downgrade(&z));
    Ok(z)
}

/// One server's view of a zone: its entries are prefixed with the server's context.
#[derive(Debug)]
pub struct ZoneStore {
    zone: Arc<SessionZone>,
    context: [u8; 8],
    ttl: Duration,
}

impl ZoneStore {
    pub fn new(zone: Arc<SessionZone>, context: [u8; 8], ttl: Duration) -> ZoneStore {
        ZoneStore { zone, context, ttl }
    }

    fn key(&self, key: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(8 + key.len());
        k.extend_from_slice(&self.context);
        k.extend_from_slice(key);
        k
    }
}

impl StoresServerSessions for ZoneStore {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        self.zone.put(self.key(&key), value, self.ttl)
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.zone.get(&self.key(key), false)
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.zone.get(&self.key(key), true)
    }

    fn can_cache(&self) -> bool {
        true
    }
}

/// One ticket key (a 48- or 80-byte file of nginx's).
#[derive(Clone)]
pub struct TicketKey {
    name: [u8; 16],
    hmac: hmac::Key,
    aes: Vec<u8>,
}

impl std::fmt::Debug for TicketKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TicketKey").finish_non_exhaustive()
    }
}

impl TicketKey {
    /// A key from a file's bytes: 48 (AES-128) or 80 (AES-256).
    pub fn from_bytes(buf: &[u8]) -> Option<TicketKey> {
        let (hmac_len, aes_len) = match buf.len() {
            48 => (16, 16),
            80 => (32, 32),
            _ => return None,
        };
        let mut name = [0u8; 16];
        name.copy_from_slice(&buf[..16]);
        Some(TicketKey {
            name,
            hmac: hmac::Key::new(hmac::HMAC_SHA256, &buf[16..16 + hmac_len]),
            aes: buf[16 + hmac_len..16 + hmac_len + aes_len].to_vec(),
        })
    }

    /// A random 80-byte key.
    pub fn random() -> TicketKey {
        let mut buf = [0u8; 80];
        aws_lc_rs::rand::fill(&mut buf).expect("the system's random source works");
        TicketKey::from_bytes(&buf).expect("80 bytes make a key")
    }

    /// Reads an `ssl_session_ticket_key` file, with nginx's messages.
    pub fn from_file(path: &std::path::Path) -> Result<TicketKey, Error> {
        let buf = std::fs::read(path)
            .map_err(|e| Error::failed(format_args!("open() \"{}\"", path.display()), e))?;
        TicketKey::from_bytes(&buf)
            .ok_or_else(|| Error::invalid(format!("\"{}\" must be 48 or 80 bytes", path.display())))
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        use cbc::cipher::{block_padding::Pkcs7, BlockEncryptMut, KeyIvInit};
        let mut iv = [0u8; 16];
        aws_lc_rs::rand::fill(&mut iv).ok()?;
        let enc = match self.aes.len() {
            16 => cbc::Encryptor::<aes::Aes128>::new_from_slices(&self.aes, &iv)
                .ok()?
                .encrypt_padded_vec_mut::<Pkcs7>(plain),
            _ => cbc::Encryptor::<aes::Aes256>::new_from_slices(&self.aes, &iv)
                .ok()?
                .encrypt_padded_vec_mut::<Pkcs7>(plain),
        };
        let mut out = Vec::with_capacity(32 + enc.len() + 32);
        out.extend_from_slice(&self.name);
        out.extend_from_slice(&iv);
        out.extend_from_slice(&enc);
        let tag = hmac::sign(&self.hmac, &out);
        out.extend_from_slice(tag.as_ref());
        Some(out)
    }

    fn decrypt(&self, ticket: &[u8]) -> Option<Vec<u8>> {
        use cbc::cipher::{block_padding::Pkcs7, BlockDecryptMut, KeyIvInit};
        if ticket.len() < 16 + 16 + 16 + 32 || ticket[..16] != self.name {
            return None;
        }
        let (body, tag) = ticket.split_at(ticket.len() - 32);
        hmac::verify(&self.hmac, body, tag).ok()?;
        let (iv, enc) = (&body[16..32], &body[32..]);
        match self.aes.len() {
            16 => cbc::Decryptor::<aes::Aes128>::new_from_slices(&self.aes, iv)
                .ok()?
                .decrypt_padded_vec_mut::<Pkcs7>(enc)
                .ok(),
            _ => cbc::Decryptor::<aes::Aes256>::new_from_slices(&self.aes, iv)
                .ok()?
                .decrypt_padded_vec_mut::<Pkcs7>(enc)
                .ok(),
        }
    }
}

/// rustls's ticket maker over nginx's keys.
#[derive(Debug)]
pub struct Ticketer {
    /// The first encrypts; all decrypt.
    keys: Vec<TicketKey>,
    timeout: Duration,
}

impl Ticketer {
    pub fn new(keys: Vec<TicketKey>, timeout: Duration) -> Ticketer {
        debug_assert!(!keys.is_empty());
        Ticketer { keys, timeout }
    }

    /// Keys from a zone (random, shared by the zone's servers) when no file names them.
    pub fn for_zone(zone: &SessionZone, timeout: Duration) -> Ticketer {
        Ticketer::new(vec![zone.ticket_key()], timeout)
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl ProducesTickets for Ticketer {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        u32::try_from(self.timeout.as_secs()).unwrap_or(u32::MAX)
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let mut buf = Vec::with_capacity(8 + plain.len());
        buf.extend_from_slice(&unix_now().to_be_bytes());
        buf.extend_from_slice(plain);
        self.keys.first()?.encrypt(&buf)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        let plain = self.keys.iter().find_map(|k| k.decrypt(cipher))?;
        let issued = u64::from_be_bytes(plain.get(..8)?.try_into().ok()?);
        let age = unix_now().checked_sub(issued)?;
        if age > self.timeout.as_secs() {
            return None;
        }
        Some(plain[8..].to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_bounds_and_order() {
        let z = Arc::new(SessionZone::builtin(2).unwrap());
        let s = ZoneStore::new(z.clone(), [1; 8], Duration::from_secs(60));
        assert!(s.put(b"a".to_vec(), b"1".to_vec()));
        assert!(s.put(b"b".to_vec(), b"2".to_vec()));
        // nginx's order: a lookup does not refresh a session.
        assert_eq!(s.get(b"a"), Some(b"1".to_vec()));
        assert!(s.put(b"c".to_vec(), b"3".to_vec()));
        assert_eq!(s.get(b"a"), None, "the oldest went");
        assert_eq!(s.get(b"b"), Some(b"2".to_vec()));
        assert_eq!(s.take(b"c"), Some(b"3".to_vec()));
        assert_eq!(s.get(b"c"), None);
        assert!(!s.put(b"big".to_vec(), vec![0; MAX_SESSION_SIZE + 1]));
        // Another server's context does not see these sessions.
        let other = ZoneStore::new(z, [2; 8], Duration::from_secs(60));
        assert_eq!(other.get(b"b"), None);
    }

    /// Sessions of varied sizes through a ring much smaller than their sum: whatever the
    /// zone still holds reads back whole, and the newest are the ones held.
    #[test]
    fn the_ring_keeps_whole_sessions() {
        let z = Arc::new(SessionZone::with_capacity("ring", 0, 1000, 5000).unwrap());
        let s = ZoneStore::new(z.clone(), [3; 8], Duration::from_secs(60));
        let value = |i: u32| -> Vec<u8> {
            let len = 1 + (i * 37 % 900) as usize;
            (0..len).map(|j| (i as usize + j) as u8).collect()
        };
        for i in 0..400u32 {
            assert!(s.put(i.to_be_bytes().to_vec(), value(i)));
        }
        let held: Vec<u32> = (0..400u32)
            .filter(|i| match s.get(&i.to_be_bytes()) {
                Some(v) => {
                    assert_eq!(v, value(*i), "session {i}");
                    true
                }
                None => false,
            })
            .collect();
        assert!(held.contains(&399) && !held.contains(&0), "{held:?}");
        let bytes: usize = held.iter().map(|i| value(*i).len()).sum();
        assert!(bytes <= 5000, "{bytes}");
        // The held ones are the newest: no gap after the first held.
        assert_eq!(held.len() as u32, 400 - held[0]);
    }

    /// Random stores, lookups and takes of sessions of every length up to the largest, in
    /// zones of one session and of a few, whose rings wrap many times: a lookup gives the
    /// session last stored under its key or nothing, never bytes another write reached, and
    /// the session just stored is always there.
    #[test]
    fn the_ring_keeps_whole_sessions_only() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rand = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for (capacity, ring_len) in [(1, MAX_SESSION_SIZE), (3, MAX_SESSION_SIZE), (40, 9000)] {
            let z = SessionZone::with_capacity("", 0, capacity, ring_len).unwrap();
            let ttl = Duration::from_secs(600);
            let mut model: HashMap<u64, Vec<u8>> = HashMap::new();
            for step in 0..3000u64 {
                let k = rand(capacity as u64 * 2 + 2);
                let key = k.to_le_bytes().to_vec();
                match rand(4) {
                    0 | 1 => {
                        let len = match rand(4) {
                            0 => MAX_SESSION_SIZE as u64 + rand(3),
                            1 => MAX_SESSION_SIZE as u64 - rand(3),
                            _ => rand(MAX_SESSION_SIZE as u64),
                        } as usize;
                        let value: Vec<u8> =
                            (0..len).map(|i| (step + i as u64 * 7) as u8).collect();
                        let stored = z.put(key.clone(), value.clone(), ttl);
                        assert_eq!(stored, len <= MAX_SESSION_SIZE, "length {len}");
                        if stored {
                            model.insert(k, value);
                            assert_eq!(z.get(&key, false).as_ref(), model.get(&k), "just stored");
                        }
                    }
                    2 => {
                        let got = z.get(&key, false);
                        assert!(got.is_none() || got.as_ref() == model.get(&k), "key {k}");
                    }
                    _ => {
                        let got = z.get(&key, true);
                        assert!(got.is_none() || got.as_ref() == model.get(&k), "key {k}");
                        model.remove(&k);
                        assert_eq!(z.get(&key, false), None, "taken");
                    }
                }
                assert!(z.len() <= capacity);
            }
        }
    }

    /// A session stored by a forked child is resumed by its parent (the root master's
    /// children of two configurations share the zone so).
    #[test]
    fn a_forked_childs_sessions_are_seen() {
        let z = Arc::new(SessionZone::shared("forked", 1 << 20).unwrap());
        let s = ZoneStore::new(z.clone(), [4; 8], Duration::from_secs(60));
        // SAFETY: fork in a test; the child only stores a session and exits.
        let child = unsafe { libc::fork() };
        if child == 0 {
            let ok = s.put(b"id".to_vec(), b"state".to_vec());
            // SAFETY: ends the child at once.
            unsafe { libc::_exit(i32::from(!ok)) };
        }
        let mut status = 0;
        // SAFETY: our child, a valid status pointer.
        unsafe { libc::waitpid(child, &mut status, 0) };
        assert_eq!(status, 0);
        assert_eq!(s.get(b"id"), Some(b"state".to_vec()));
    }

    #[test]
    fn expiry() {
        let z = Arc::new(SessionZone::builtin(10).unwrap());
        let s = ZoneStore::new(z.clone(), [0; 8], Duration::ZERO);
        s.put(b"a".to_vec(), b"1".to_vec());
        assert_eq!(s.get(b"a"), None);
        assert!(z.is_empty());
    }

    #[test]
    fn sized_as_nginx() {
        assert_eq!(
            SessionZone::shared("x", 1024 * 1024).unwrap().capacity(),
            4000
        );
        assert_eq!(
            SessionZone::shared("x", 10 * 1024 * 1024)
                .unwrap()
                .capacity(),
            40000
        );
        let a = shared_zone("test-sized", 1 << 20).unwrap();
        let b = shared_zone("test-sized", 1 << 20).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let c = shared_zone("test-sized", 2 << 20).unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
    }

    #[test]
    fn tickets_rotate_by_order() {
        let k48 = TicketKey::from_bytes(&[1u8; 48]).unwrap();
        let k80 = TicketKey::from_bytes(&[2u8; 80]).unwrap();
        assert!(TicketKey::from_bytes(&[0u8; 50]).is_none());
        let old = Ticketer::new(vec![k48.clone()], Duration::from_secs(60));
        let t = old.encrypt(b"state").unwrap();
        assert_eq!(old.decrypt(&t), Some(b"state".to_vec()));
        // The new key encrypts, the old one still decrypts.
        let rotated = Ticketer::new(vec![k80.clone(), k48], Duration::from_secs(60));
        assert_eq!(rotated.decrypt(&t), Some(b"state".to_vec()));
        let t2 = rotated.encrypt(b"new").unwrap();
        assert_eq!(old.decrypt(&t2), None);
        // Tampering is refused.
        let mut bad = t.clone();
        let n = bad.len();
        bad[n - 40] ^= 1;
        assert_eq!(old.decrypt(&bad), None);
        assert_eq!(old.decrypt(&t[..20]), None);
        // Too old.
        let expired = Ticketer::new(vec![k80], Duration::ZERO);
        let mut plain = (unix_now() - 5).to_be_bytes().to_vec();
        plain.extend_from_slice(b"x");
        let t3 = expired.keys[0].encrypt(&plain).unwrap();
        assert_eq!(expired.decrypt(&t3), None);
    }
}
