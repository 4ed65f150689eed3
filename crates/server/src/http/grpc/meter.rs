//! The size of an upstream answer's head as it came on the wire, for `grpc_buffer_size`.
//!
//! nginx reads a gRPC upstream into one buffer of `grpc_buffer_size` bytes and refuses an
//! answer whose head does not fit in it (`upstream sent too big header`): what counts is the
//! head's frames as sent (each frame's 9-byte header and its HPACK-encoded fields), not the
//! decoded fields the codec hands over. [`Frames`] follows the frames through the upstream's
//! bytes as the connection's task reads them (their headers only: nothing is copied), and
//! notes the size of each stream's first header block (HEADERS and its CONTINUATIONs; the
//! trailers, a later block on the same stream, are not bounded, as in nginx).
//!
//! nginx's buffer may also hold a small frame that came just before the head in the same read
//! (a WINDOW_UPDATE, a PING): that is not counted here, so a head within a few bytes of the
//! limit may be taken here where nginx refuses it.

const FRAME_HEAD: usize = 9;
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_HEADERS: u8 = 0x4;

/// Where the byte stream stands among frames, and the last head measured.
#[derive(Default)]
pub struct Frames {
    /// The current frame's header, `have` bytes of it read.
    head: [u8; FRAME_HEAD],
    have: usize,
    /// Payload bytes of the current frame still to come.
    skip: usize,
    /// The stream whose head is being read, and its bytes so far.
    current: (u32, usize),
    /// The last stream whose head was read whole, and its size.
    last: (u32, usize),
}

impl Frames {
    /// The size of `stream`'s answer's head as it came, once it came whole.
    pub fn head_size(&self, stream: u32) -> Option<usize> {
        (self.last.0 == stream).then_some(self.last.1)
    }

    /// Follows the frames through bytes just read.
    pub fn scan(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(data.len());
                self.skip -= n;
                data = &data[n..];
                continue;
            }
            // A frame's header read whole is taken where it is; one cut between reads is
            // gathered first.
            let h = match data.split_first_chunk::<FRAME_HEAD>() {
                Some((h, rest)) if self.have == 0 => {
                    data = rest;
                    *h
                }
                _ => {
                    let n = (FRAME_HEAD - self.have).min(data.len());
                    self.head[self.have..self.have + n].copy_from_slice(&data[..n]);
                    self.have += n;
                    data = &data[n..];
                    if self.have < FRAME_HEAD {
                        return;
                    }
                    self.have = 0;
                    self.head
                }
            };
            let len = (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]);
            let id = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
            let (kind, flags) = (h[3], h[4]);
            self.skip = len;
            self.frame(kind, flags, id, FRAME_HEAD + len);
        }
    }

    fn frame(&mut self, kind: u8, flags: u8, id: u32, size: usize) {
        match kind {
            // A stream's first header block: its head (a later one is its trailers).
            HEADERS if id > self.last.0 => self.current = (id, size),
            CONTINUATION if id != 0 && id == self.current.0 => self.current.1 += size,
            _ => return,
        }
        if flags & END_HEADERS != 0 {
            self.last = self.current;
            self.current = (0, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, id: u32, len: usize) -> Vec<u8> {
        let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        f.extend_from_slice(&id.to_be_bytes());
        f.extend(std::iter::repeat_n(0xaa, len));
        f
    }

    #[test]
    fn a_head_is_measured_across_frames_and_reads() {
        let mut f = Frames::default();
        let bytes = [
            frame(0x4, 0, 0, 6),       // SETTINGS
            frame(HEADERS, 0, 1, 100), // a head in two blocks
            frame(CONTINUATION, END_HEADERS, 1, 50),
            frame(0x0, 0, 1, 20_000),               // DATA
            frame(HEADERS, END_HEADERS | 1, 1, 30), // trailers: not a head
        ]
        .concat();
        // Read a few bytes at a time: frame headers are cut between reads.
        for piece in bytes.chunks(7) {
            f.scan(piece);
        }
        assert_eq!(f.head_size(1), Some(9 + 100 + 9 + 50));
        // Whole, in one read; then a frame's header cut in two after whole frames.
        let mut whole = Frames::default();
        whole.scan(&bytes);
        assert_eq!(whole.head_size(1), Some(9 + 100 + 9 + 50));
        let next = [frame(0x0, 0, 1, 3), frame(HEADERS, END_HEADERS, 3, 40)].concat();
        whole.scan(&next[..12 + 4]);
        whole.scan(&next[12 + 4..]);
        assert_eq!(whole.head_size(3), Some(49));
        f.scan(&frame(HEADERS, END_HEADERS, 3, 40));
        assert_eq!((f.head_size(1), f.head_size(3)), (None, Some(49)));
    }
}
