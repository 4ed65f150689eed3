//! The answer's records, read incrementally from the connection's buffer into [`Event`]s.
//!
//! Content is handed out as it arrives, not once a record is whole: a 64 KiB `STDOUT` record
//! is not held back until its last byte, and memory stays bounded by what the caller reads.
//! Until the head is complete its stdout bytes are gathered (at most `max_head` bytes in
//! all, the way nginx's header buffer counts them); after it, stdout goes out as slices of the
//! read buffer, without copies.

use std::collections::VecDeque;

use bytes::{Buf, Bytes, BytesMut};

use super::{EndRequest, Event, FastcgiError, RecordType, Stderr, Surplus, HEADER_LEN, VERSION};
use crate::cgi::CgiHeadParser;
use crate::upstream::UpstreamError;

/// The record types an answer may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Stdout,
    Stderr,
    End,
}

/// Where the decoder is within the current record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Record {
    /// Expecting a record header.
    Header,
    /// In a record's content: `left` bytes of it to come, then `padding`.
    Content {
        kind: Kind,
        left: usize,
        padding: u8,
    },
    /// In a record's padding; `end` if the record was `END_REQUEST`.
    Padding { left: u8, end: bool },
}

#[derive(Debug)]
enum Phase {
    /// Before the head is complete.
    Head {
        /// Stdout gathered so far.
        stdout: BytesMut,
        parser: CgiHeadParser,
        /// Bytes nginx's header buffer would hold: record headers, content, padding.
        used: usize,
        /// A `STDOUT` record has begun.
        stdout_seen: bool,
    },
    /// After the head: `left` bytes of body to come if it has a `Content-Length`.
    Body { left: Option<u64> },
    /// `END_REQUEST` has been read.
    Done,
}

/// Reads one FastCGI answer. Feed it the connection's read buffer with [`Decoder::decode`]
/// until it answers `Ok(None)`, read more, repeat; at the connection's close call
/// [`Decoder::eof`]. After [`Event::End`], bytes left in the buffer are not part of the answer:
/// the connection may serve another request only with keep-conn and nothing left over.
///
/// For nginx's accounting of `fastcgi_buffer_size` to hold, read at most `max_head` bytes at a
/// time until the head has come.
#[derive(Debug)]
pub struct Decoder {
    max_head: usize,
    keep_conn: bool,
    record: Record,
    phase: Phase,
    /// `END_REQUEST`'s content so far.
    end: [u8; 8],
    end_len: usize,
    /// Events found but not yet handed out (the body bytes that came with the head).
    queue: VecDeque<Event>,
    surplus: bool,
    head_request: bool,
    /// Bytes left in the buffer when the head's count started over: nginx had consumed them
    /// already, so they do not count.
    credit: usize,
}

impl Decoder {
    /// A decoder for one answer; `max_head` is `fastcgi_buffer_size`, `keep_conn` is
    /// `fastcgi_keep_conn` (it says whether a close before `END_REQUEST` is an error),
    /// `head_request` whether the request was `HEAD` (then nginx holds the body to no
    /// `Content-Length`).
    pub fn new(max_head: usize, keep_conn: bool, head_request: bool) -> Decoder {
        Decoder {
            max_head,
            keep_conn,
            record: Record::Header,
            phase: Phase::Head {
                stdout: BytesMut::new(),
                parser: CgiHeadParser::cgi(),
                used: 0,
                stdout_seen: false,
            },
            end: [0; 8],
            end_len: 0,
            queue: VecDeque::new(),
            surplus: false,
            head_request,
            credit: 0,
        }
    }

    /// Whether `END_REQUEST` has been read.
    pub fn is_done(&self) -> bool {
        matches!(self.phase, Phase::Done) && self.queue.is_empty()
    }

    /// Whether the head has been handed out.
    pub fn head_done(&self) -> bool {
        !matches!(self.phase, Phase::Head { .. })
    }

    /// The next event from the front of `buf`, consuming what it used. `Ok(None)`: read more
    /// (or, once [`Decoder::is_done`], stop). An error is final.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Event>, FastcgiError> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Ok(Some(event));
            }
            if matches!(self.phase, Phase::Done) {
                return Ok(None);
            }
            // What may be looked at: before the head, only what nginx's buffer would hold.
            let avail = match &self.phase {
                Phase::Head { used, .. } => buf.len().min(self.max_head.saturating_sub(*used)),
                _ => buf.len(),
            };
            match self.record {
                Record::Header => {
                    check_header(&buf[..avail.min(4)])?;
                    if avail < HEADER_LEN {
                        return self.need_more(buf, avail);
                    }
                    let h = &buf[..HEADER_LEN];
                    let len = usize::from(u16::from_be_bytes([h[4], h[5]]));
                    let padding = h[6];
                    let kind = match h[1] {
                        6 => Kind::Stdout,
                        7 => Kind::Stderr,
                        _ => Kind::End,
                    };
                    self.consume(buf, HEADER_LEN);
                    if let Phase::Head { stdout_seen, .. } = &mut self.phase {
                        *stdout_seen |= kind == Kind::Stdout;
                        if kind == Kind::End {
                            return Err(FastcgiError::UnexpectedRecord(
                                RecordType::EndRequest as u8,
                            ));
                        }
                        if kind == Kind::Stdout && len == 0 {
                            return Err(FastcgiError::PrematureStdout);
                        }
                    }
                    self.record = Record::Content {
                        kind,
                        left: len,
                        padding,
                    };
                }
                Record::Content {
                    kind,
                    left: 0,
                    padding,
                } => {
                    self.record = Record::Padding {
                        left: padding,
                        end: kind == Kind::End,
                    };
                }
                Record::Content {
                    kind,
                    left,
                    padding,
                } => {
                    let n = left.min(avail);
                    if n == 0 {
                        return self.need_more(buf, avail);
                    }
                    self.record = Record::Content {
                        kind,
                        left: left - n,
                        padding,
                    };
                    match kind {
                        Kind::Stdout => {
                            if let Some(event) = self.stdout(buf, n)? {
                                return Ok(Some(event));
                            }
                        }
                        Kind::Stderr => {
                            let piece = buf.split_to(n).freeze();
                            self.count(n);
                            if let Phase::Head {
                                used, stdout_seen, ..
                            } = &mut self.phase
                            {
                                // nginx's buffer is empty (all it read is consumed: a record
                                // header's first bytes too, into its parser's state) and has
                                // held nothing but stderr: it starts over, so that a flood of
                                // PHP warnings before the head takes no more memory.
                                // What is left is at most this record's padding and the
                                // next header's first bytes.
                                let rest = if left == n {
                                    usize::from(padding) + HEADER_LEN
                                } else {
                                    1
                                };
                                if !*stdout_seen && (buf.len() < rest || *used >= self.max_head) {
                                    *used = 0;
                                    // The rest was consumed before nginx started over.
                                    self.credit = buf.len();
                                }
                            }
                            return Ok(Some(Event::Stderr(Stderr(piece))));
                        }
                        Kind::End => {
                            let take = n.min(self.end.len() - self.end_len);
                            self.end[self.end_len..self.end_len + take]
                                .copy_from_slice(&buf[..take]);
                            self.end_len += take;
                            self.consume(buf, n);
                        }
                    }
                }
                Record::Padding { left: 0, end } => {
                    self.record = Record::Header;
                    if end {
                        return self.finish().map(Some);
                    }
                }
                Record::Padding { left, end } => {
                    let n = usize::from(left).min(avail);
                    if n == 0 {
                        return self.need_more(buf, avail);
                    }
                    self.consume(buf, n);
                    self.record = Record::Padding {
                        left: left - n as u8,
                        end,
                    };
                }
            }
        }
    }

    /// The connection closed: fine once the answer is complete, and, without keep-conn, after
    /// the head (nginx takes the close as the end); else the answer was cut short.
    pub fn eof(&self) -> Result<(), FastcgiError> {
        match self.phase {
            Phase::Done => Ok(()),
            Phase::Body { .. } if !self.keep_conn => Ok(()),
            _ => Err(FastcgiError::PrematureClose),
        }
    }

    /// `n` stdout bytes at the front of `buf`: gathered into the head, or body.
    fn stdout(&mut self, buf: &mut BytesMut, n: usize) -> Result<Option<Event>, FastcgiError> {
        let Phase::Head {
            stdout,
            parser,
            used,
            ..
        } = &mut self.phase
        else {
            let data = buf.split_to(n).freeze();
            self.body(data);
            return Ok(self.queue.pop_front());
        };
        stdout.extend_from_slice(&buf[..n]);
        buf.advance(n);
        *used += n;
        // The decoder counts the header buffer itself.
        let Some(head) = parser.parse_buf(stdout, usize::MAX)? else {
            return Ok(None);
        };
        let rest = stdout.split().freeze();
        // What the body is held to: nothing after 204 and 304, no length for a HEAD request.
        let left = match head.status() {
            204 | 304 => Some(0),
            _ if self.head_request => None,
            _ => head.content_length(),
        };
        self.phase = Phase::Body { left };
        self.queue.push_back(Event::Head(head));
        self.body(rest);
        Ok(self.queue.pop_front())
    }

    /// Queues body bytes through the `Content-Length` filter.
    fn body(&mut self, mut data: Bytes) {
        let mut surplus = false;
        if let Phase::Body { left: Some(left) } = &mut self.phase {
            let keep = usize::try_from(*left).unwrap_or(usize::MAX).min(data.len());
            *left -= keep as u64;
            if keep < data.len() {
                data.truncate(keep);
                surplus = !self.surplus;
                self.surplus = true;
            }
        }
        if !data.is_empty() {
            self.queue.push_back(Event::Stdout(data));
        }
        if surplus {
            self.queue.push_back(Event::Surplus(Surplus));
        }
    }

    /// `END_REQUEST` and its padding are read.
    fn finish(&mut self) -> Result<Event, FastcgiError> {
        if let Phase::Body { left: Some(left) } = self.phase {
            if left > 0 {
                return Err(FastcgiError::PrematureRequest);
            }
        }
        self.phase = Phase::Done;
        let e = self.end;
        Ok(Event::End(EndRequest {
            app_status: u32::from_be_bytes([e[0], e[1], e[2], e[3]]),
            protocol_status: e[4],
        }))
    }

    fn consume(&mut self, buf: &mut BytesMut, n: usize) {
        buf.advance(n);
        self.count(n);
    }

    /// Counts `n` bytes into nginx's header buffer while the head is being read.
    fn count(&mut self, n: usize) {
        let free = n.min(self.credit);
        self.credit -= free;
        if let Phase::Head { used, .. } = &mut self.phase {
            *used += n - free;
        }
    }

    /// Nothing more can be done with the bytes at hand: read more, unless nginx's header
    /// buffer is full, which is `upstream sent too big header`.
    fn need_more(&mut self, buf: &BytesMut, avail: usize) -> Result<Option<Event>, FastcgiError> {
        if let Phase::Head {
            used, stdout_seen, ..
        } = &mut self.phase
        {
            // Everything read is consumed and none of it was stdout: nginx's buffer starts
            // over (a record header may have been the last thing in it).
            if buf.is_empty() && !*stdout_seen {
                *used = 0;
                return Ok(None);
            }
            if avail < buf.len() || *used >= self.max_head {
                return Err(UpstreamError::TooBigHeader.into());
            }
        }
        Ok(None)
    }
}

/// Checks the first bytes of a record header as nginx does, in order, as they arrive.
fn check_header(h: &[u8]) -> Result<(), FastcgiError> {
    if let Some(&v) = h.first() {
        if v != VERSION {
            return Err(FastcgiError::UnsupportedVersion(v));
        }
    }
    if let Some(&t) = h.get(1) {
        if !matches!(t, 3 | 6 | 7) {
            return Err(FastcgiError::InvalidRecordType(t));
        }
    }
    if let Some(&hi) = h.get(2) {
        if hi != 0 {
            return Err(FastcgiError::UnexpectedRequestIdHigh(hi));
        }
    }
    if let Some(&lo) = h.get(3) {
        if lo != 1 {
            return Err(FastcgiError::UnexpectedRequestIdLow(lo));
        }
    }
    Ok(())
}
