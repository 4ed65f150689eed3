//! A table from keys to states in least-recently-used order, in shared memory: one shard of a
//! zone, which every serving process of this shoal reads and writes (see `shoal_io::shm`).
//!
//! Laid out once, at the zone's creation: a head (the order's ends, the free list) under a
//! process-shared lock, `capacity` slots linked from the newest to the oldest, and an index of
//! at least twice as many entries (linear probing; a removal shifts the entries after it back,
//! so there are no tombstones). Lookups, inserts and the removal of the oldest are O(1) and
//! allocate nothing.
//!
//! A key is kept as 128 bits of keyed hash (two SipHashes whose keys are drawn when the zone is
//! made, before any fork, so every process computes the same) and its length, which is what the
//! zone's memory budget counts: two keys the table confuses would need a collision of a keyed
//! 128-bit hash, which a client cannot aim for.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::marker::PhantomData;

use crate::shm::{self, Carver, Plain, Shared};

const NIL: u32 = u32::MAX;

/// What identifies a key: its keyed hashes.
pub type Id = [u64; 2];

/// The hashers that make [`Id`]s, the same in every process (drawn before the fork).
pub struct Ids {
    a: RandomState,
    b: RandomState,
}

impl Ids {
    pub fn new() -> Ids {
        Ids {
            a: RandomState::new(),
            b: RandomState::new(),
        }
    }

    pub fn of(&self, key: &[u8]) -> Id {
        [self.a.hash_one(key), self.b.hash_one(key)]
    }

    /// The second half of `key`'s [`Id`] alone (a table's slot is found from the first: the
    /// second picks a shard without hashing the key twice more).
    pub fn second(&self, key: &[u8]) -> u64 {
        self.b.hash_one(key)
    }
}

impl Default for Ids {
    fn default() -> Ids {
        Ids::new()
    }
}

#[derive(Clone, Copy)]
#[repr(C)]
struct Slot<V> {
    id: Id,
    key_len: u32,
    /// Towards the most recent (the next free slot, on the free list).
    newer: u32,
    /// Towards the oldest.
    older: u32,
    value: V,
}

// SAFETY: numbers, and a plain `V`.
unsafe impl<V: Plain> Plain for Slot<V> {}

/// The shard's head, under its lock.
pub struct Head {
    len: u32,
    newest: u32,
    oldest: u32,
    /// Freed slots, linked through `newer`.
    free: u32,
    /// Slots from here on were never used.
    unused: u32,
}

// SAFETY: numbers.
unsafe impl Plain for Head {}

/// A shard's memory: where its head, index and slots are.
pub struct Table<V> {
    head: Shared<shm::Mutex<Head>>,
    /// Slot number + 1 per entry; 0 is empty (so the zeroed mapping is an empty index).
    index: *mut u32,
    mask: u32,
    slots: *mut Slot<V>,
    capacity: u32,
}

// SAFETY: the index and slots are only touched with the head's lock held (through `Lru`).
unsafe impl<V: Send> Send for Table<V> {}
unsafe impl<V: Send> Sync for Table<V> {}

impl<V: Copy + Send + Plain> Table<V> {
    /// The bytes a table of `capacity` states takes, for sizing its region.
    pub fn bytes(capacity: u32) -> usize {
        let capacity = slots(capacity);
        let entries = index_len(capacity) as usize;
        std::mem::size_of::<shm::Mutex<Head>>()
            + 64
            + entries * 4
            + capacity as usize * std::mem::size_of::<Slot<V>>()
    }

    /// A table of `capacity` states laid out by `carver`.
    pub fn new(carver: &mut Carver, capacity: u32) -> Table<V> {
        let capacity = slots(capacity);
        let head = carver.mutex(Head {
            len: 0,
            newest: NIL,
            oldest: NIL,
            free: NIL,
            unused: 0,
        });
        let entries = index_len(capacity);
        Table {
            head,
            index: carver.zeroed_array::<u32>(entries as usize),
            mask: entries - 1,
            // Slots are written before they are read: zero bytes are never taken for a `V`.
            slots: carver.zeroed_array::<Slot<V>>(capacity as usize),
            capacity,
        }
    }

    /// The table, locked.
    pub fn lock<'a>(&'a self, ids: &'a Ids) -> Lru<'a, V> {
        Lru {
            head: self.head.lock(),
            t: self,
            ids,
            _v: PhantomData,
        }
    }

    /// The table if no one holds it now.
    pub fn try_lock<'a>(&'a self, ids: &'a Ids) -> Option<Lru<'a, V>> {
        Some(Lru {
            head: self.head.try_lock()?,
            t: self,
            ids,
            _v: PhantomData,
        })
    }
}

/// The slots a table asked for `capacity` gets: at most 2^30, so that the index (at most
/// 2^31 entries) is never more than half full.
fn slots(capacity: u32) -> u32 {
    capacity.clamp(1, 1 << 30)
}

fn index_len(capacity: u32) -> u32 {
    (u64::from(capacity) * 2).next_power_of_two().min(1 << 31) as u32
}

/// A locked shard: keys and states in use order.
pub struct Lru<'a, V> {
    head: shm::MutexGuard<'a, Head>,
    t: &'a Table<V>,
    ids: &'a Ids,
    _v: PhantomData<V>,
}

impl<V: Copy> Lru<'_, V> {
    pub fn len(&self) -> usize {
        self.head.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.head.len == 0
    }

    fn slot(&self, i: u32) -> &Slot<V> {
        debug_assert!(i < self.t.capacity);
        // SAFETY: `i` is a slot in use (below `capacity`), and the lock is held.
        unsafe { &*self.t.slots.add(i as usize) }
    }

    fn slot_mut(&mut self, i: u32) -> &mut Slot<V> {
        debug_assert!(i < self.t.capacity);
        // SAFETY: as `slot`, and `&mut self` holds the lock alone.
        unsafe { &mut *self.t.slots.add(i as usize) }
    }

    fn entry(&self, e: u32) -> u32 {
        // SAFETY: `e` is masked into the index; the lock is held.
        unsafe { *self.t.index.add((e & self.t.mask) as usize) }
    }

    fn set_entry(&mut self, e: u32, v: u32) {
        // SAFETY: as `entry`, with `&mut self`.
        unsafe { *self.t.index.add((e & self.t.mask) as usize) = v };
    }

    /// The index entry and slot of `id`.
    fn find(&self, id: &Id) -> Option<(u32, u32)> {
        let mut e = id[0] as u32 & self.t.mask;
        loop {
            match self.entry(e) {
                0 => return None,
                s if self.slot(s - 1).id == *id => return Some((e, s - 1)),
                _ => e = (e + 1) & self.t.mask,
            }
        }
    }

    /// Empties index entry `e`, moving back the entries after it that probed past it.
    fn unindex(&mut self, mut e: u32) {
        let mask = self.t.mask;
        let mut next = (e + 1) & mask;
        loop {
            let s = self.entry(next);
            if s == 0 {
                break;
            }
            let home = self.slot(s - 1).id[0] as u32 & mask;
            // Stays unless its home is not within (e, next], cyclically.
            if (next.wrapping_sub(home) & mask) >= (next.wrapping_sub(e) & mask) {
                self.set_entry(e, s);
                e = next;
            }
            next = (next + 1) & mask;
        }
        self.set_entry(e, 0);
    }

    fn unlink(&mut self, i: u32) {
        let (newer, older) = {
            let s = self.slot(i);
            (s.newer, s.older)
        };
        match newer {
            NIL => self.head.newest = older,
            n => self.slot_mut(n).older = older,
        }
        match older {
            NIL => self.head.oldest = newer,
            o => self.slot_mut(o).newer = newer,
        }
    }

    fn link_newest(&mut self, i: u32) {
        let old_newest = self.head.newest;
        {
            let s = self.slot_mut(i);
            s.newer = NIL;
            s.older = old_newest;
        }
        match old_newest {
            NIL => self.head.oldest = i,
            n => self.slot_mut(n).newer = i,
        }
        self.head.newest = i;
    }

    /// The state of `key`, made the most recently used.
    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut V> {
        let (_, i) = self.find(&self.ids.of(key))?;
        if self.head.newest != i {
            self.unlink(i);
            self.link_newest(i);
        }
        Some(&mut self.slot_mut(i).value)
    }

    /// The state of `key`, its place in the order unchanged.
    pub fn peek_mut(&mut self, key: &[u8]) -> Option<&mut V> {
        let (_, i) = self.find(&self.ids.of(key))?;
        Some(&mut self.slot_mut(i).value)
    }

    /// Adds `key` (absent) as the most recently used; false when every slot is taken.
    #[must_use]
    pub fn insert(&mut self, key: &[u8], value: V) -> bool {
        let id = self.ids.of(key);
        debug_assert!(self.find(&id).is_none());
        let i = match self.head.free {
            NIL if self.head.unused < self.t.capacity => {
                self.head.unused += 1;
                self.head.unused - 1
            }
            NIL => return false,
            i => {
                self.head.free = self.slot(i).newer;
                i
            }
        };
        let slot = Slot {
            id,
            key_len: key.len() as u32,
            value,
            newer: NIL,
            older: NIL,
        };
        // SAFETY: a free slot (below `capacity`), written whole before any read.
        unsafe { self.t.slots.add(i as usize).write(slot) };
        let mut e = id[0] as u32 & self.t.mask;
        while self.entry(e) != 0 {
            e = (e + 1) & self.t.mask;
        }
        self.set_entry(e, i + 1);
        self.link_newest(i);
        self.head.len += 1;
        true
    }

    fn drop_slot(&mut self, e: u32, i: u32) -> V {
        self.unindex(e);
        self.unlink(i);
        let free = self.head.free;
        self.slot_mut(i).newer = free;
        self.head.free = i;
        self.head.len -= 1;
        self.slot(i).value
    }

    /// Removes `key`.
    pub fn remove(&mut self, key: &[u8]) -> Option<V> {
        let (e, i) = self.find(&self.ids.of(key))?;
        Some(self.drop_slot(e, i))
    }

    /// The least recently used state, with its key's length.
    pub fn oldest(&self) -> Option<(usize, &V)> {
        (self.head.oldest != NIL).then(|| {
            let s = self.slot(self.head.oldest);
            (s.key_len as usize, &s.value)
        })
    }

    /// Removes the least recently used state; its key's length and state.
    pub fn pop_oldest(&mut self) -> Option<(usize, V)> {
        let i = self.head.oldest;
        if i == NIL {
            return None;
        }
        let id = self.slot(i).id;
        let key_len = self.slot(i).key_len as usize;
        let (e, _) = self.find(&id).expect("a linked slot is indexed");
        Some((key_len, self.drop_slot(e, i)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shm::Region;

    fn table<V: Copy + Send + Plain>(capacity: u32) -> Table<V> {
        let region = Region::new("t", Table::<V>::bytes(capacity)).unwrap();
        Table::new(&mut Carver::new(region), capacity)
    }

    #[test]
    fn order_follows_use() {
        let (t, ids) = (table::<usize>(8), Ids::new());
        let mut l = t.lock(&ids);
        for k in ["a", "b", "c"] {
            assert!(l.insert(k.as_bytes(), k.len()));
        }
        assert_eq!(l.oldest().map(|(n, v)| (n, *v)), Some((1, 1)));
        assert!(l.get_mut(b"a").is_some());
        assert!(l.peek_mut(b"b").is_some());
        assert_eq!(l.pop_oldest().map(|(n, _)| n), Some(1));
        assert!(l.get_mut(b"b").is_none(), "b was the oldest");
        assert_eq!(l.remove(b"a"), Some(1));
        assert_eq!(l.len(), 1);
        assert!(l.insert(b"dd", 2));
        assert_eq!(l.pop_oldest(), Some((1, 1)), "c");
        assert_eq!(l.pop_oldest(), Some((2, 2)), "dd");
        assert!(l.pop_oldest().is_none());
        assert!(l.is_empty());
        assert!(l.get_mut(b"a").is_none());
    }

    #[test]
    fn slots_are_reused_and_bounded() {
        let (t, ids) = (table::<u32>(3), Ids::new());
        let mut l = t.lock(&ids);
        for round in 0..100u32 {
            assert!(l.insert(&round.to_be_bytes(), round));
            if l.len() == 3 {
                assert!(!l.insert(b"over", 0), "three slots");
                l.pop_oldest();
            }
        }
        assert_eq!(l.len(), 2);
        assert_eq!(l.get_mut(&99u32.to_be_bytes()).copied(), Some(99));
        assert_eq!(l.get_mut(&98u32.to_be_bytes()).copied(), Some(98));
    }

    /// Many keys in and out in a mixed order: the index finds exactly the live ones (the
    /// backward shift keeps every probe chain whole).
    #[test]
    fn removals_keep_every_key_findable() {
        let (t, ids) = (table::<u64>(512), Ids::new());
        let mut l = t.lock(&ids);
        let mut live = std::collections::BTreeSet::new();
        let mut x = 12345u64;
        for _ in 0..20_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let k = (x >> 33) % 700;
            if live.contains(&k) {
                assert_eq!(l.remove(&k.to_le_bytes()), Some(k));
                live.remove(&k);
            } else if l.len() < 512 {
                assert!(l.insert(&k.to_le_bytes(), k));
                live.insert(k);
            }
        }
        for k in 0..700u64 {
            assert_eq!(
                l.peek_mut(&k.to_le_bytes()).copied(),
                live.contains(&k).then_some(k)
            );
        }
        assert_eq!(l.len(), live.len());
    }

    /// An index at most half full keeps every probe short and ends every search: a table of
    /// more than 2^30 slots had a full index, where an insert or a search for an absent key
    /// went round forever.
    #[test]
    fn the_index_has_twice_the_slots() {
        for asked in [0, 1, 2, 3, 1000, 1 << 29, (1 << 30) + 1, NIL - 1, NIL] {
            let n = slots(asked);
            assert!(n >= 1);
            assert!(u64::from(index_len(n)) >= 2 * u64::from(n), "{asked}: {n}");
        }
    }

    /// Random inserts, removals, pops and lookups against a model (a queue from the oldest to
    /// the newest): after each step the length and the oldest agree, every key the model holds
    /// is found with its value and no other is, and popping everything gives the model's order.
    #[test]
    fn follows_a_model_of_random_use() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for capacity in [1u32, 2, 3, 7, 16, 33] {
            let (t, ids) = (table::<u64>(capacity), Ids::new());
            let mut l = t.lock(&ids);
            let mut model: std::collections::VecDeque<(u64, u64)> = Default::default();
            let keys = u64::from(capacity) * 2 + 1;
            for step in 0..4000u64 {
                let k = rand(keys);
                let at = model.iter().position(|&(mk, _)| mk == k);
                match (rand(6), at) {
                    (0 | 1, None) => {
                        let room = model.len() < capacity as usize;
                        assert_eq!(l.insert(&k.to_le_bytes(), step), room, "insert {k}");
                        if room {
                            model.push_back((k, step));
                        }
                    }
                    (0 | 1, Some(_)) | (2, _) => {
                        let gone = at.map(|i| model.remove(i).unwrap().1);
                        assert_eq!(l.remove(&k.to_le_bytes()), gone, "remove {k}");
                    }
                    (3, _) => {
                        let got = l.pop_oldest();
                        let want = model.pop_front().map(|(_, v)| (8, v));
                        assert_eq!(got, want, "pop");
                    }
                    (4, _) => {
                        let got = l.get_mut(&k.to_le_bytes()).map(|v| {
                            *v += 1;
                            *v
                        });
                        let want = at.map(|i| {
                            let (mk, v) = model.remove(i).unwrap();
                            model.push_back((mk, v + 1));
                            v + 1
                        });
                        assert_eq!(got, want, "get {k}");
                    }
                    _ => {
                        let got = l.peek_mut(&k.to_le_bytes()).map(|v| *v);
                        assert_eq!(got, at.map(|i| model[i].1), "peek {k}");
                    }
                }
                assert_eq!(l.len(), model.len());
                assert_eq!(
                    l.oldest().map(|(n, v)| (n, *v)),
                    model.front().map(|&(_, v)| (8, v))
                );
                for k in 0..keys {
                    let want = model.iter().find(|&&(mk, _)| mk == k).map(|&(_, v)| v);
                    assert_eq!(l.peek_mut(&k.to_le_bytes()).copied(), want, "find {k}");
                }
            }
            let order: Vec<u64> = std::iter::from_fn(|| l.pop_oldest().map(|(_, v)| v)).collect();
            let want: Vec<u64> = model.iter().map(|&(_, v)| v).collect();
            assert_eq!(order, want, "capacity {capacity}");
            assert!(l.is_empty());
        }
    }
}
