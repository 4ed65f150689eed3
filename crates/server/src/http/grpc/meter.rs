//! The size of an upstream answer's head as it came on the wire, for `grpc_buffer_size`.
//!
//! nginx reads a gRPC upstream into one buffer of `grpc_buffer_size` bytes and refuses an
//! answer whose head does not fit in it (`upstream sent too big header`): what counts is the
//! head's frames as sent (each frame's 9-byte header and its HPACK-encoded fields), not the
//! decoded fields the `h2` crate hands over. [`Metered`] reads the upstream's bytes for the
//! `h2` crate and follows their frames on the way (their headers only: nothing is copied), and
//! notes the size of each stream's first header block (HEADERS and its CONTINUATIONs; the
//! trailers, a later block on the same stream, are not bounded, as in nginx).
//!
//! nginx's buffer may also hold a small frame that came just before the head in the same read
//! (a WINDOW_UPDATE, a PING): that is not counted here, so a head within a few bytes of the
//! limit may be taken here where nginx refuses it.

use std::cell::Cell;
use std::io;
use std::io::IoSlice;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::http::h2::io::Io;

/// The last stream whose head was measured, and the head's size in bytes.
pub type HeadSize = Rc<Cell<(u32, usize)>>;

const FRAME_HEAD: usize = 9;
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_HEADERS: u8 = 0x4;

/// An upstream connection's bytes, its heads measured as they are read.
pub struct Metered {
    io: Io,
    frames: Frames,
}

impl Metered {
    pub fn new(io: Io, sizes: HeadSize) -> Metered {
        Metered {
            io,
            frames: Frames {
                head: [0; FRAME_HEAD],
                have: 0,
                skip: 0,
                current: (0, 0),
                sizes,
            },
        }
    }
}

/// Where the byte stream stands among frames.
struct Frames {
    /// The current frame's header, `have` bytes of it read.
    head: [u8; FRAME_HEAD],
    have: usize,
    /// Payload bytes of the current frame still to come.
    skip: usize,
    /// The stream whose head is being read, and its bytes so far.
    current: (u32, usize),
    sizes: HeadSize,
}

impl Frames {
    /// Follows the frames through bytes just read.
    fn scan(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(data.len());
                self.skip -= n;
                data = &data[n..];
                continue;
            }
            let n = (FRAME_HEAD - self.have).min(data.len());
            self.head[self.have..self.have + n].copy_from_slice(&data[..n]);
            self.have += n;
            data = &data[n..];
            if self.have < FRAME_HEAD {
                return;
            }
            self.have = 0;
            let h = &self.head;
            let len = (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]);
            let id = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
            let (kind, flags) = (h[3], h[4]);
            self.skip = len;
            self.frame(kind, flags, id, FRAME_HEAD + len);
        }
    }

    fn frame(&mut self, kind: u8, flags: u8, id: u32, size: usize) {
        let (measured, _) = self.sizes.get();
        match kind {
            // A stream's first header block: its head (a later one is its trailers).
            HEADERS if id > measured => self.current = (id, size),
            CONTINUATION if id != 0 && id == self.current.0 => self.current.1 += size,
            _ => return,
        }
        if flags & END_HEADERS != 0 {
            self.sizes.set(self.current);
            self.current = (0, 0);
        }
    }
}

impl AsyncRead for Metered {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.io).poll_read(cx, buf);
        this.frames.scan(&buf.filled()[before..]);
        r
    }
}

impl AsyncWrite for Metered {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
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
        let sizes = HeadSize::default();
        let mut f = Frames {
            head: [0; FRAME_HEAD],
            have: 0,
            skip: 0,
            current: (0, 0),
            sizes: sizes.clone(),
        };
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
        assert_eq!(sizes.get(), (1, 9 + 100 + 9 + 50));
        f.scan(&frame(HEADERS, END_HEADERS, 3, 40));
        assert_eq!(sizes.get(), (3, 49));
    }
}
