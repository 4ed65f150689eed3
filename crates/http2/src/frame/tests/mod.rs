//! Unit tests from hand-written frames: every rule of RFC 9113 the frame layer enforces, the
//! flow control, what the server sends, and the floods.

mod client;
mod flood;
mod flow;
mod rules;
mod send;
mod split;

use super::*;

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const PRIORITY: u8 = 0x2;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PUSH_PROMISE: u8 = 0x5;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;

pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
pub const PRIO: u8 = 0x20;

/// One frame, by hand.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

pub fn settings(params: &[(u16, u32)]) -> Vec<u8> {
    let mut p = Vec::new();
    for &(id, v) in params {
        p.extend_from_slice(&id.to_be_bytes());
        p.extend_from_slice(&v.to_be_bytes());
    }
    frame(SETTINGS, 0, 0, &p)
}

pub fn u32be(v: u32) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

/// A HEADERS frame with a whole (fake, undecoded) block that ends the request.
pub fn get(stream: u32) -> Vec<u8> {
    frame(HEADERS, END_HEADERS | END_STREAM, stream, b"\x82\x84")
}

/// A HEADERS frame opening a request with a body to come.
pub fn post(stream: u32) -> Vec<u8> {
    frame(HEADERS, END_HEADERS, stream, b"\x83\x84")
}

pub fn window_update(stream: u32, inc: u32) -> Vec<u8> {
    frame(WINDOW_UPDATE, 0, stream, &u32be(inc))
}

/// A frame the server sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Out {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl Out {
    pub fn code(&self) -> u32 {
        let at = if self.kind == GOAWAY { 4 } else { 0 };
        u32::from_be_bytes(self.payload[at..at + 4].try_into().unwrap())
    }
}

/// A test's side of the connection.
pub struct Peer {
    pub conn: Connection,
    pub events: Vec<Event>,
    /// Every byte given to `recv`, so events' ranges can be read.
    pub input: Vec<u8>,
}

impl Peer {
    /// A connection past the preface and the first SETTINGS exchange (ours acknowledged).
    pub fn new(cfg: Config) -> Peer {
        let mut p = Peer::raw(cfg);
        let mut hello = PREFACE.to_vec();
        hello.extend(settings(&[]));
        hello.extend(frame(SETTINGS, ACK, 0, &[]));
        p.feed(&hello).unwrap();
        let out = p.take_output();
        assert_eq!(out[0].kind, SETTINGS);
        assert_eq!(
            out.last(),
            Some(&Out {
                kind: SETTINGS,
                flags: ACK,
                stream: 0,
                payload: vec![]
            })
        );
        p.events.clear();
        p
    }

    /// A client's connection past both SETTINGS (ours acknowledged), its output drained.
    pub fn client(cfg: Config) -> Peer {
        let mut p = Peer {
            conn: Connection::client(cfg),
            events: Vec::new(),
            input: Vec::new(),
        };
        assert!(p.conn.pending_output().starts_with(PREFACE));
        let n = PREFACE.len();
        p.conn.advance(n);
        let mut hello = settings(&[]);
        hello.extend(frame(SETTINGS, ACK, 0, &[]));
        p.feed(&hello).unwrap();
        p.take_output();
        p.events.clear();
        p
    }

    pub fn raw(cfg: Config) -> Peer {
        Peer {
            conn: Connection::new(cfg),
            events: Vec::new(),
            input: Vec::new(),
        }
    }

    /// Gives `bytes` to `recv` whole: asserts every byte was taken.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), ConnError> {
        let n = self.feed_part(bytes)?;
        assert_eq!(n, bytes.len(), "recv left bytes");
        Ok(())
    }

    /// Gives `bytes` to `recv`; events' ranges are moved to index `self.input`.
    pub fn feed_part(&mut self, bytes: &[u8]) -> Result<usize, ConnError> {
        let base = self.input.len();
        let r = self.conn.recv(bytes);
        self.input.extend_from_slice(bytes);
        while let Some(mut e) = self.conn.poll_event() {
            match &mut e {
                Event::Data { data, .. } => *data = data.start + base..data.end + base,
                Event::Headers {
                    block: Block::Input(r),
                    ..
                }
                | Event::Trailers {
                    block: Block::Input(r),
                    ..
                }
                | Event::Discard {
                    block: Block::Input(r),
                } => *r = r.start + base..r.end + base,
                _ => {}
            }
            self.events.push(e);
        }
        r
    }

    /// The frames waiting in the output, drained.
    pub fn take_output(&mut self) -> Vec<Out> {
        let out = parse_frames(self.conn.pending_output());
        let n = self.conn.pending_output().len();
        self.conn.advance(n);
        out
    }

    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// The block of a Headers, Trailers or Discard event.
    pub fn block(&self, e: &Event) -> Vec<u8> {
        match e {
            Event::Headers { block, .. }
            | Event::Trailers { block, .. }
            | Event::Discard { block } => block.bytes(&self.input).to_vec(),
            _ => panic!("no block in {e:?}"),
        }
    }

    /// Asserts the connection failed with `code` and its GOAWAY is the last frame out.
    pub fn expect_conn_error(&mut self, bytes: &[u8], code: Reason) {
        let e = self.feed(bytes).expect_err("a connection error");
        assert_eq!(e.code, code, "{e}");
        let out = self.take_output();
        let last = out.last().expect("a GOAWAY");
        assert_eq!((last.kind, last.code()), (GOAWAY, code.0));
        assert_eq!(self.conn.recv(&[]), Err(e), "stays failed");
    }

    /// Asserts `bytes` made a stream error `code` on `stream` and nothing worse.
    pub fn expect_stream_error(&mut self, bytes: &[u8], stream: u32, code: Reason) {
        self.feed(bytes).expect("no connection error");
        let out = self.take_output();
        assert!(
            out.iter()
                .any(|f| f.kind == RST_STREAM && f.stream == stream && f.code() == code.0),
            "no RST_STREAM {code:?} on {stream} in {out:?}"
        );
        assert!(!out.iter().any(|f| f.kind == GOAWAY), "{out:?}");
    }
}

pub fn parse_frames(mut b: &[u8]) -> Vec<Out> {
    let mut v = Vec::new();
    while !b.is_empty() {
        assert!(b.len() >= 9, "a partial frame header");
        let len = (b[0] as usize) << 16 | (b[1] as usize) << 8 | b[2] as usize;
        let stream = u32::from_be_bytes([b[5], b[6], b[7], b[8]]);
        v.push(Out {
            kind: b[3],
            flags: b[4],
            stream,
            payload: b[9..9 + len].to_vec(),
        });
        b = &b[9 + len..];
    }
    v
}
