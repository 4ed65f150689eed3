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

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_lc_rs::hmac;
use rustls::server::{ProducesTickets, StoresServerSessions};

use crate::error::Error;
/// nginx's smallest zone: eight pages.
pub const MIN_ZONE_SIZE: usize = 8 * 4096;

/// nginx: "one megabyte of the cache contains about 4000 sessions".
const SESSIONS_PER_MB: usize = 4000;

/// nginx does not cache a session larger than this.
const MAX_SESSION_SIZE: usize = 4096;

/// A bounded LRU map of sessions with expiry.
#[derive(Debug)]
pub struct SessionZone {
    pub name: String,
    pub size: usize,
    capacity: usize,
    inner: Mutex<Lru>,
    /// The ticket key of servers that use this zone and name no key file.
    ticket_key: OnceLock<TicketKey>,
}

#[derive(Debug, Default)]
struct Lru {
    map: HashMap<Vec<u8>, Entry>,
    /// Use order: sequence number → key; the oldest first.
    order: BTreeMap<u64, Vec<u8>>,
    seq: u64,
}

#[derive(Debug)]
struct Entry {
    value: Vec<u8>,
    expires: Instant,
    seq: u64,
}

impl SessionZone {
    /// A zone of `size` bytes (`shared:NAME:SIZE`).
    pub fn shared(name: &str, size: usize) -> SessionZone {
        Self::with_capacity(name, size, (size * SESSIONS_PER_MB / (1024 * 1024)).max(1))
    }

    /// A zone holding `sessions` sessions (`builtin:N`).
    pub fn builtin(sessions: usize) -> SessionZone {
        Self::with_capacity("", 0, sessions.max(1))
    }

    fn with_capacity(name: &str, size: usize, capacity: usize) -> SessionZone {
        SessionZone {
            name: name.to_string(),
            size,
            capacity,
            inner: Mutex::new(Lru::default()),
            ticket_key: OnceLock::new(),
        }
    }

    /// How many sessions the zone holds at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// How many it holds now.
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lru> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn put(&self, key: Vec<u8>, value: Vec<u8>, ttl: Duration) -> bool {
        if value.len() > MAX_SESSION_SIZE {
            return false;
        }
        let now = Instant::now();
        let mut lru = self.lock();
        lru.seq += 1;
        let seq = lru.seq;
        if let Some(old) = lru.map.insert(
            key.clone(),
            Entry {
                value,
                expires: now + ttl,
                seq,
            },
        ) {
            lru.order.remove(&old.seq);
        }
        lru.order.insert(seq, key);
        while lru.map.len() > self.capacity {
            let Some((_, oldest)) = lru.order.pop_first() else {
                break;
            };
            lru.map.remove(&oldest);
        }
        true
    }

    fn get(&self, key: &[u8], take: bool) -> Option<Vec<u8>> {
        let now = Instant::now();
        let mut lru = self.lock();
        let (expired, seq) = match lru.map.get(key) {
            Some(e) => (e.expires <= now, e.seq),
            None => return None,
        };
        if expired || take {
            lru.order.remove(&seq);
            let e = lru.map.remove(key)?;
            return (!expired).then_some(e.value);
        }
        lru.seq += 1;
        let next = lru.seq;
        lru.order.remove(&seq);
        lru.order.insert(next, key.to_vec());
        let e = lru.map.get_mut(key)?;
        e.seq = next;
        Some(e.value.clone())
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
pub fn shared_zone(name: &str, size: usize) -> Arc<SessionZone> {
    let mut map = zones().lock().unwrap_or_else(|e| e.into_inner());
    map.retain(|_, z| z.strong_count() > 0);
    if let Some(z) = map.get(name).and_then(Weak::upgrade) {
        if z.size == size {
            return z;
        }
    }
    let z = Arc::new(SessionZone::shared(name, size));
    map.insert(name.to_string(), Arc::downgrade(&z));
    z
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
        let z = Arc::new(SessionZone::builtin(2));
        let s = ZoneStore::new(z.clone(), [1; 8], Duration::from_secs(60));
        assert!(s.put(b"a".to_vec(), b"1".to_vec()));
        assert!(s.put(b"b".to_vec(), b"2".to_vec()));
        assert_eq!(s.get(b"a"), Some(b"1".to_vec())); // a is now the most recent
        assert!(s.put(b"c".to_vec(), b"3".to_vec()));
        assert_eq!(s.get(b"b"), None, "the least recently used went");
        assert_eq!(s.get(b"a"), Some(b"1".to_vec()));
        assert_eq!(s.take(b"c"), Some(b"3".to_vec()));
        assert_eq!(s.get(b"c"), None);
        assert!(!s.put(b"big".to_vec(), vec![0; MAX_SESSION_SIZE + 1]));
        // Another server's context does not see these sessions.
        let other = ZoneStore::new(z, [2; 8], Duration::from_secs(60));
        assert_eq!(other.get(b"a"), None);
    }

    #[test]
    fn expiry() {
        let z = Arc::new(SessionZone::builtin(10));
        let s = ZoneStore::new(z.clone(), [0; 8], Duration::ZERO);
        s.put(b"a".to_vec(), b"1".to_vec());
        assert_eq!(s.get(b"a"), None);
        assert!(z.is_empty());
    }

    #[test]
    fn sized_as_nginx() {
        assert_eq!(SessionZone::shared("x", 1024 * 1024).capacity(), 4000);
        assert_eq!(SessionZone::shared("x", 10 * 1024 * 1024).capacity(), 40000);
        let a = shared_zone("test-sized", 1 << 20);
        let b = shared_zone("test-sized", 1 << 20);
        assert!(Arc::ptr_eq(&a, &b));
        let c = shared_zone("test-sized", 2 << 20);
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
