//! The streams a connection has open: a vector sorted by id (streams open in increasing order
//! of id, so a new one is pushed at the end), each record 20 bytes, removed once closed.

/// One open stream (open, or half-closed either way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stream {
    pub id: u32,
    /// What we may still send; negative after the peer shrank SETTINGS_INITIAL_WINDOW_SIZE.
    pub send_window: i32,
    /// What the peer may still send.
    pub recv_window: i32,
    /// Body bytes the caller consumed and no WINDOW_UPDATE gave back yet.
    pub unacked: u32,
    /// The peer sent END_STREAM: half-closed (remote).
    pub remote_closed: bool,
    /// We sent END_STREAM: half-closed (local).
    pub local_closed: bool,
    /// The peer's head came (a request's, always; an answer's, once its HEADERS came): a
    /// later header block is trailers.
    pub head_in: bool,
}

/// How many of the streams we reset last are remembered.
const RECENT: usize = 8;

#[derive(Debug, Default)]
pub(crate) struct Streams {
    list: Vec<Stream>,
    /// The streams we reset last: frames the client sent before it saw our RST_STREAM are
    /// ignored on them (RFC 9113, 5.1, "closed"), rather than answered or fatal.
    recent: [u32; RECENT],
    next: u8,
}

impl Streams {
    pub fn len(&self) -> usize {
        self.list.len()
    }

    fn index(&self, id: u32) -> Option<usize> {
        // The newest stream is the likeliest one (its request), then the oldest (answers go
        // out mostly in the order their requests came).
        match (self.list.last(), self.list.first()) {
            (Some(s), _) if s.id == id => Some(self.list.len() - 1),
            (_, Some(s)) if s.id == id => Some(0),
            _ => self.list.binary_search_by_key(&id, |s| s.id).ok(),
        }
    }

    pub fn get(&mut self, id: u32) -> Option<&mut Stream> {
        let i = self.index(id)?;
        Some(&mut self.list[i])
    }

    /// The highest id open.
    pub fn last_id(&self) -> Option<u32> {
        self.list.last().map(|s| s.id)
    }

    /// Adds a stream whose id is above every other's.
    pub fn push(&mut self, s: Stream) {
        debug_assert!(self.list.last().is_none_or(|l| l.id < s.id));
        self.list.push(s);
    }

    pub fn remove(&mut self, id: u32) -> Option<Stream> {
        let i = self.index(id)?;
        // Capacity stays for the next stream; `shrink` gives it back when the connection idles.
        Some(self.list.remove(i))
    }

    /// We sent a RST_STREAM for `id`.
    pub fn note_reset(&mut self, id: u32) {
        self.recent[self.next as usize % RECENT] = id;
        self.next = self.next.wrapping_add(1);
    }

    /// Whether we reset `id` lately.
    pub fn reset_lately(&self, id: u32) -> bool {
        id != 0 && self.recent.contains(&id)
    }

    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, Stream> {
        self.list.iter_mut()
    }

    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.list.capacity()
    }

    /// The list when empty, for another connection (see `Connection::take_lists`).
    pub fn take_list(&mut self) -> Vec<Stream> {
        if self.list.is_empty() {
            std::mem::take(&mut self.list)
        } else {
            Vec::new()
        }
    }

    /// An empty list from `take_list`, kept if this holds none.
    pub fn give_list(&mut self, list: Vec<Stream>) {
        if self.list.capacity() == 0 && list.is_empty() {
            self.list = list;
        }
    }

    pub fn shrink(&mut self) {
        if self.list.is_empty() {
            self.list = Vec::new();
        }
        self.list.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stream_is_found_by_its_id_first_last_or_between() {
        let mut s = Streams::default();
        for id in [1, 3, 7, 9] {
            s.push(Stream {
                id,
                send_window: id as i32,
                recv_window: 0,
                unacked: 0,
                remote_closed: false,
                local_closed: false,
                head_in: true,
            });
        }
        for id in [1, 3, 7, 9] {
            assert_eq!(s.get(id).map(|s| s.send_window), Some(id as i32), "{id}");
        }
        for id in [0, 2, 5, 11] {
            assert!(s.get(id).is_none(), "{id}");
        }
        assert_eq!(s.remove(1).map(|s| s.id), Some(1));
        assert_eq!(s.remove(7).map(|s| s.id), Some(7));
        assert_eq!(s.get(3).map(|s| s.id), Some(3));
        assert_eq!(s.get(9).map(|s| s.id), Some(9));
        assert!(s.get(1).is_none() && s.get(7).is_none());
    }
}
