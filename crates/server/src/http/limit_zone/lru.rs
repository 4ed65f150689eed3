//! A map from keys (bytes) to states in least-recently-used order: one shard of a zone.
//!
//! A hash map to slot indexes and a doubly linked list through a slot vector, so a lookup that
//! refreshes a state, an insert and the removal of the oldest are all O(1) without allocating
//! per operation beyond the key. The hasher is std's keyed SipHash: keys come from clients.

use std::collections::HashMap;

const NIL: u32 = u32::MAX;

struct Slot<V> {
    key: Box<[u8]>,
    value: V,
    /// Towards the most recent.
    newer: u32,
    /// Towards the oldest.
    older: u32,
}

/// Keys and values in use order.
pub struct Lru<V> {
    index: HashMap<Box<[u8]>, u32>,
    slots: Vec<Option<Slot<V>>>,
    free: Vec<u32>,
    newest: u32,
    oldest: u32,
}

impl<V> Default for Lru<V> {
    fn default() -> Self {
        Lru {
            index: HashMap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            newest: NIL,
            oldest: NIL,
        }
    }
}

impl<V> Lru<V> {
    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    fn slot(&self, i: u32) -> &Slot<V> {
        self.slots[i as usize]
            .as_ref()
            .expect("linked slots are occupied")
    }

    fn slot_mut(&mut self, i: u32) -> &mut Slot<V> {
        self.slots[i as usize]
            .as_mut()
            .expect("linked slots are occupied")
    }

    fn unlink(&mut self, i: u32) {
        let (newer, older) = {
            let s = self.slot(i);
            (s.newer, s.older)
        };
        match newer {
            NIL => self.newest = older,
            n => self.slot_mut(n).older = older,
        }
        match older {
            NIL => self.oldest = newer,
            o => self.slot_mut(o).newer = newer,
        }
    }

    fn link_newest(&mut self, i: u32) {
        let old_newest = self.newest;
        {
            let s = self.slot_mut(i);
            s.newer = NIL;
            s.older = old_newest;
        }
        match old_newest {
            NIL => self.oldest = i,
            n => self.slot_mut(n).newer = i,
        }
        self.newest = i;
    }

    /// The state of `key`, made the most recently used.
    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut V> {
        let i = *self.index.get(key)?;
        if self.newest != i {
            self.unlink(i);
            self.link_newest(i);
        }
        Some(&mut self.slot_mut(i).value)
    }

    /// The state of `key`, its place in the order unchanged.
    pub fn peek_mut(&mut self, key: &[u8]) -> Option<&mut V> {
        let i = *self.index.get(key)?;
        Some(&mut self.slot_mut(i).value)
    }

    /// Adds `key` (absent) as the most recently used.
    pub fn insert(&mut self, key: &[u8], value: V) {
        debug_assert!(!self.index.contains_key(key));
        let slot = Slot {
            key: key.into(),
            value,
            newer: NIL,
            older: NIL,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(slot);
                i
            }
            None => {
                self.slots.push(Some(slot));
                (self.slots.len() - 1) as u32
            }
        };
        self.index.insert(key.into(), i);
        self.link_newest(i);
    }

    /// Removes `key`.
    pub fn remove(&mut self, key: &[u8]) -> Option<V> {
        let i = self.index.remove(key)?;
        self.unlink(i);
        self.free.push(i);
        self.slots[i as usize].take().map(|s| s.value)
    }

    /// The least recently used key and its state.
    pub fn oldest(&self) -> Option<(&[u8], &V)> {
        (self.oldest != NIL).then(|| {
            let s = self.slot(self.oldest);
            (&*s.key, &s.value)
        })
    }

    /// Removes the least recently used state.
    pub fn pop_oldest(&mut self) -> Option<(Box<[u8]>, V)> {
        if self.oldest == NIL {
            return None;
        }
        let i = self.oldest;
        self.unlink(i);
        let s = self.slots[i as usize]
            .take()
            .expect("linked slots are occupied");
        self.index.remove(&s.key);
        self.free.push(i);
        Some((s.key, s.value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_follows_use() {
        let mut l = Lru::default();
        for k in ["a", "b", "c"] {
            l.insert(k.as_bytes(), k.len());
        }
        assert_eq!(l.oldest().map(|(k, _)| k), Some(&b"a"[..]));
        assert!(l.get_mut(b"a").is_some());
        assert_eq!(l.oldest().map(|(k, _)| k), Some(&b"b"[..]));
        assert!(l.peek_mut(b"b").is_some());
        assert_eq!(l.oldest().map(|(k, _)| k), Some(&b"b"[..]));
        assert_eq!(l.pop_oldest().map(|(k, _)| k), Some(b"b"[..].into()));
        assert_eq!(l.remove(b"a"), Some(1));
        assert_eq!(l.len(), 1);
        l.insert(b"d", 1);
        assert_eq!(l.pop_oldest().map(|(k, _)| k), Some(b"c"[..].into()));
        assert_eq!(l.pop_oldest().map(|(k, _)| k), Some(b"d"[..].into()));
        assert!(l.pop_oldest().is_none());
        assert!(l.is_empty());
        assert!(l.get_mut(b"a").is_none());
    }

    #[test]
    fn slots_are_reused() {
        let mut l = Lru::default();
        for round in 0..100u32 {
            l.insert(&round.to_be_bytes(), round);
            if l.len() > 3 {
                l.pop_oldest();
            }
        }
        assert!(l.slots.len() <= 4);
        assert_eq!(l.len(), 3);
        assert_eq!(l.get_mut(&99u32.to_be_bytes()).copied(), Some(99));
    }
}
