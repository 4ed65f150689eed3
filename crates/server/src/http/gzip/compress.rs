//! The gzip filter's compressor: zlib-rs states reused per worker, and shoal's own encoder for
//! small bodies of known length.

/// A streaming compressor: feed body bytes, take compressed output as it is produced.
///
/// Deflate states are reused: each worker keeps a few per (level, window, memory level) and
/// resets them between answers instead of allocating ~250 KB per response. The window and the
/// memory level are lowered for a body of known length as nginx does (both down one step while
/// the length is below half the window), so a 1 KB JSON gets a 2 KB window and 1 K-symbol
/// blocks. zlib-rs's hash table is 64 K entries whatever the memory level (zlib-ng's layout),
/// so every reset still clears 128 KB: why small answers do not come here.
///
/// Output goes to a scratch buffer kept with the state (no allocation per answer); `feed` and
/// `finish` lend it until the next call.
///
/// A body of known length up to [`SMALL_MAX`] at levels 1–4 goes to shoal's own encoder
/// instead ([`shoal_http::deflate`]), whose setup costs nothing: it is gathered (small by
/// definition) and compressed whole at `finish`. If more arrives than the length said, the
/// gathered bytes move to a zlib-rs state and the answer streams from there.
pub struct Compressor {
    pub(super) state: Option<State>,
    pub(super) small: Option<Small>,
    pub(super) key: Key,
}

/// The largest known body length the small encoder takes. Its setup is free but it is slower
/// per byte than zlib-rs (greedy matching in plain safe Rust): about even at 4–8 KiB, zlib-rs
/// ahead past that (the `crossover` test; bench/README.md has the figures).
pub const SMALL_MAX: u64 = 8 * 1024;

/// The small encoder's per-worker buffers.
pub(super) struct Small {
    enc: shoal_http::deflate::Encoder,
    pub(super) input: Vec<u8>,
    out: Vec<u8>,
}

thread_local! {
    static SMALL: std::cell::RefCell<Option<Small>> = const { std::cell::RefCell::new(None) };
}

/// (level, window bits, memory level).
type Key = (u8, u8, u8);

pub(super) struct State {
    z: zlib_rs::Deflate,
    out: Vec<u8>,
}

thread_local! {
    static STATES: std::cell::RefCell<Vec<(Key, State)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// States kept per worker.
const KEEP_STATES: usize = 8;

/// A kept state's scratch buffer is shrunk back to this when it grew past it.
const KEEP_OUT: usize = 64 * 1024;

/// A zlib-rs state for `key`, one the worker kept or a new one.
pub(super) fn zlib_state(key: Key) -> State {
    let reused = STATES.with(|s| {
        let mut s = s.borrow_mut();
        s.iter()
            .position(|(k, _)| *k == key)
            .map(|i| s.swap_remove(i).1)
    });
    let (level, wbits, memlevel) = key;
    reused.unwrap_or_else(|| State {
        // Valid by construction (level 1..=9, window 9..=15 plus 16 for a gzip wrapper,
        // memory level 1..=8), which is all zlib-rs's constructor asserts.
        z: zlib_rs::Deflate::new_with_config(zlib_rs::DeflateConfig {
            level: i32::from(level),
            method: zlib_rs::Method::Deflated,
            window_bits: i32::from(wbits) + 16,
            mem_level: i32::from(memlevel),
            strategy: zlib_rs::Strategy::Default,
        }),
        out: vec![0; 4096],
    })
}

/// nginx's window bits and memory level for a body of `len` bytes
/// (ngx_http_gzip_filter_memory): 15 and 8, each lowered by one while the body fits in half
/// the window (less zlib's 262-byte lookahead margin).
pub(super) fn sizes(len: Option<u64>) -> (u8, u8) {
    let (mut wbits, mut memlevel) = (15u8, 8u8);
    if let Some(n) = len.filter(|n| *n > 0) {
        while wbits > 9 && n < ((1u64 << (wbits - 1)) - 262) {
            wbits -= 1;
            memlevel = memlevel.saturating_sub(1);
        }
    }
    (wbits, memlevel.max(1))
}

impl crate::http::output::BodyFilter for Compressor {
    fn feed(&mut self, data: &[u8]) -> std::io::Result<&[u8]> {
        Compressor::feed(self, data)
    }

    fn finish(&mut self) -> std::io::Result<&[u8]> {
        Compressor::finish(self)
    }

    fn after_postpone(&self) -> bool {
        true
    }
}

impl Compressor {
    /// A compressor at `level` (1..=9) for a body of `len` bytes if known.
    pub fn new(level: u32, len: Option<u64>) -> Compressor {
        debug_assert!(
            (1..=9).contains(&level),
            "gzip_comp_level is checked when read"
        );
        let (wbits, memlevel) = sizes(len);
        let key = (level.clamp(1, 9) as u8, wbits, memlevel);
        if level <= 4 && len.is_some_and(|n| n <= SMALL_MAX) {
            let small = SMALL
                .try_with(|s| s.borrow_mut().take())
                .ok()
                .flatten()
                .unwrap_or_else(|| Small {
                    enc: shoal_http::deflate::Encoder::new(),
                    input: Vec::new(),
                    out: Vec::new(),
                });
            return Compressor {
                state: None,
                small: Some(small),
                key,
            };
        }
        Compressor {
            state: Some(zlib_state(key)),
            small: None,
            key,
        }
    }

    fn run(&mut self, mut input: &[u8], flush: zlib_rs::DeflateFlush) -> std::io::Result<&[u8]> {
        let State { z, out } = self.state.as_mut().expect("present until dropped");
        let mut used = 0;
        loop {
            if out.len() - used < 64 {
                out.resize(out.len() * 2, 0);
            }
            let (in_before, out_before) = (z.total_in(), z.total_out());
            let status = z
                .compress(input, &mut out[used..], flush)
                .map_err(|e| std::io::Error::from(crate::error::Error::invalid(e.as_str())))?;
            input = &input[(z.total_in() - in_before) as usize..];
            used += (z.total_out() - out_before) as usize;
            match status {
                zlib_rs::Status::StreamEnd => break,
                // All input taken and room left: deflate holds the rest until more comes.
                _ if input.is_empty()
                    && flush == zlib_rs::DeflateFlush::NoFlush
                    && used < out.len() =>
                {
                    break
                }
                _ => {}
            }
        }
        Ok(&out[..used])
    }

    /// Compresses `data`; returns what is ready to send (may be empty).
    pub fn feed(&mut self, data: &[u8]) -> std::io::Result<&[u8]> {
        let small = match (&self.state, &mut self.small) {
            (None, Some(small)) => small,
            _ => return self.run(data, zlib_rs::DeflateFlush::NoFlush),
        };
        if small.input.len() + data.len() <= SMALL_MAX as usize {
            small.input.extend_from_slice(data);
            return Ok(&[]);
        }
        // Longer than the length said: on with zlib-rs, from the start.
        let mut gathered = std::mem::take(&mut small.input);
        gathered.extend_from_slice(data);
        self.state = Some(zlib_state(self.key));
        self.run(&gathered, zlib_rs::DeflateFlush::NoFlush)
    }

    /// Ends the stream; returns the rest (the gzip trailer included).
    pub fn finish(&mut self) -> std::io::Result<&[u8]> {
        if self.state.is_none() {
            let small = self.small.as_mut().expect("one of the two is present");
            small.out.clear();
            let level = u32::from(self.key.0);
            small.enc.gzip(&small.input, level, &mut small.out);
            return Ok(&small.out);
        }
        self.run(&[], zlib_rs::DeflateFlush::Finish)
    }
}

impl Drop for Compressor {
    /// Gives the state back to the worker, reset for the next answer (also after an error
    /// or an answer cut short: a reset state is as good as a new one).
    fn drop(&mut self) {
        if let Some(mut small) = self.small.take() {
            small.input.clear();
            small.out.clear();
            let _ = SMALL.try_with(|s| {
                let mut s = s.borrow_mut();
                if s.is_none() {
                    *s = Some(small);
                }
            });
        }
        let Some(mut state) = self.state.take() else {
            return;
        };
        state.z.reset();
        if state.out.len() > KEEP_OUT {
            state.out.truncate(KEEP_OUT);
            state.out.shrink_to_fit();
        }
        let _ = STATES.try_with(|s| {
            let mut s = s.borrow_mut();
            if s.len() < KEEP_STATES {
                s.push((self.key, state));
            }
        });
    }
}
