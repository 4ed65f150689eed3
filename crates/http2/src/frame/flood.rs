//! Flood counters: what a peer may make us do without making progress (issue 22, 4).
//!
//! - **Rapid reset** (CVE-2023-44487): a count, per connection, of streams the peer reset
//!   before we finished answering them, less one for each answer we finished; past
//!   `reset_limit` (four times `max_concurrent_streams`, at least 64) the connection ends. And, as
//!   nginx 1.25.3 does, at most twice `max_concurrent_streams` new streams per `recv` call
//!   (one read from the socket): opening and resetting at once in one read is refused too.
//! - **Frames without progress**: SETTINGS, PING, PRIORITY, WINDOW_UPDATE, RST_STREAM on a
//!   closed stream, DATA with no data and no END_STREAM, DATA on a stream we reset, a
//!   zero-length CONTINUATION, and the RST_STREAMs our stream errors queue. Counted; the
//!   count starts over when the connection makes progress (a new stream, body bytes, an
//!   answer's HEADERS or DATA sent). Past [`IDLE_FRAMES`] the connection ends.
//! - **A peer that never reads**: a PING or SETTINGS that wants an answer, or a stream error
//!   that wants a RST_STREAM, while more than `Config::max_output` bytes wait to be written
//!   ends the connection.
//!
//! Each ends the connection with GOAWAY(ENHANCE_YOUR_CALM), logged as nginx logs its floods
//! ("http2 flood detected") but for the streams' counts, which say what they counted.

use super::parse::conn_err;
use super::{ConnError, Reason};

/// Frames without progress tolerated in a row.
pub const IDLE_FRAMES: u32 = 1000;

#[derive(Debug, Default)]
pub(crate) struct Flood {
    /// Streams opened in this `recv` call.
    pub new_streams: u32,
    /// Streams reset by the peer before their answer ended, less answers finished.
    pub resets: u32,
    /// Frames without progress since the last progress.
    pub idle_frames: u32,
}

impl Flood {
    pub fn reset_limit(max_concurrent: u32) -> u32 {
        max_concurrent.saturating_mul(4).max(64)
    }

    /// A frame that made us work without progress.
    pub fn idle_frame(&mut self) -> Result<(), ConnError> {
        self.idle_frames += 1;
        if self.idle_frames > IDLE_FRAMES {
            return Err(conn_err(Reason::ENHANCE_YOUR_CALM, "http2 flood detected"));
        }
        Ok(())
    }

    pub fn progress(&mut self) {
        self.idle_frames = 0;
    }

    /// A new stream in this read.
    pub fn new_stream(&mut self, max_concurrent: u32) -> Result<(), ConnError> {
        self.new_streams += 1;
        if self.new_streams > max_concurrent.saturating_mul(2).max(2) {
            return Err(conn_err(
                Reason::ENHANCE_YOUR_CALM,
                "sent too many streams at once",
            ));
        }
        Ok(())
    }

    /// The peer reset a stream whose answer was not finished.
    pub fn early_reset(&mut self, max_concurrent: u32) -> Result<(), ConnError> {
        self.resets += 1;
        if self.resets > Flood::reset_limit(max_concurrent) {
            return Err(conn_err(
                Reason::ENHANCE_YOUR_CALM,
                "reset too many streams",
            ));
        }
        Ok(())
    }

    /// An answer finished.
    pub fn answered(&mut self) {
        self.resets = self.resets.saturating_sub(1);
        self.idle_frames = 0;
    }
}
