//! [`Sink`]: where an answer's bytes go, whatever protocol carries them (HTTP/1's writer,
//! HTTP/2's stream, a subrequest's body going in place). The output path
//! ([`crate::http::output`]) appends to its buffer, or reads a file straight into the
//! protocol's frames, and tells it when to write.

use std::io;
use std::os::fd::BorrowedFd;

use bytes::BytesMut;

use super::transport::ConnInfo;

/// Gather pipelined answers (and pieces of one) up to this many bytes before writing.
pub const MAX_GATHER: usize = 64 * 1024;

/// Where an answer's bytes go: a protocol's writer. Body bytes are appended to its output
/// buffer as they are to be sent (framing included: HTTP/1's chunks); the writer writes what is
/// gathered when told, each wait for the client bounded by `send_timeout`.
#[allow(async_fn_in_trait)] // One worker thread: futures are never sent across threads.
pub trait Sink {
    /// The gathered output not written yet.
    fn out(&mut self) -> &mut BytesMut;
    /// The connection this is for (log lines).
    fn info(&self) -> &ConnInfo;
    /// More requests are already buffered (HTTP/1 pipelining): small answers are gathered
    /// into one write rather than written one by one.
    fn more_requests_buffered(&self) -> bool;
    /// Writes what the client takes now without waiting; whether everything went.
    fn flush_now(&mut self) -> io::Result<bool>;
    /// Writes what is gathered, waiting for the client only while more than `keep` bytes of
    /// it are left. After an error nothing is left to send.
    async fn flush_to(&mut self, keep: usize) -> io::Result<()>;
    /// Writes some of `data` directly (what is gathered must have been written first): the
    /// byte count, `TimedOut` after `send_timeout` without progress.
    async fn write_some(&mut self, data: &[u8]) -> io::Result<usize>;
    /// The socket a file range may be sent to with `sendfile`, when the transport allows it.
    fn sendfile_socket(&self) -> Option<BorrowedFd<'_>>;
    /// `tcp_nopush`: holds partial packets back (on) or lets them go (off).
    fn set_cork(&self, on: bool);
    /// Waits until the socket takes more (after `sendfile` filled it), bounded by
    /// `send_timeout`.
    async fn until_writable(&mut self) -> io::Result<()>;

    /// Sends some of the `want` bytes of `file` at `offset` as the body's next bytes, after
    /// what is gathered, read straight into the protocol's output (HTTP/2's DATA frames: each
    /// byte moved once, from the file to the buffer the socket is written from), waiting for
    /// the client as [`Sink::flush_to`] does. The bytes sent; `None`: the caller reads them
    /// into [`Sink::out`] (HTTP/1).
    async fn send_file(
        &mut self,
        _file: &std::fs::File,
        _offset: u64,
        _want: usize,
    ) -> Option<io::Result<usize>> {
        None
    }

    /// Writes what is gathered.
    async fn flush(&mut self) -> io::Result<()> {
        self.flush_to(0).await
    }

    /// Writes the gathered answers unless more pipelined requests are already buffered and
    /// the batch is still small.
    async fn maybe_flush(&mut self) -> io::Result<()> {
        if !self.more_requests_buffered() || self.out().len() >= MAX_GATHER {
            self.flush().await?;
        }
        Ok(())
    }

    /// Appends body bytes, as a chunk when `chunked`. Returns the bytes added, framing
    /// included (what `$body_bytes_sent` counts, as nginx).
    fn emit(&mut self, data: &[u8], chunked: bool) -> u64 {
        if data.is_empty() {
            return 0;
        }
        let out = self.out();
        let before = out.len();
        if chunked {
            shoal_http::response::write_chunk(out, data);
        } else {
            out.extend_from_slice(data);
        }
        (out.len() - before) as u64
    }
}
