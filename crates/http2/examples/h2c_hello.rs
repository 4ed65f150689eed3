//! A bare h2c server on the codec alone (frame layer, HPACK, the `server` room), to run h2spec,
//! h2load and nghttp against it before the codec is wired into shoal: every request is
//! answered `:status 200`, `content-type: text/plain` and a body of "hello" (after its own
//! body is read whole); a header block past the bounds gets 431.
//!
//!     cargo run --release -p shoal-http2 --example h2c_hello -- 127.0.0.1:18080 &
//!     h2spec -h 127.0.0.1 -p 18080
//!
//! At the `server` room's first commit: h2spec 2.2.1 passes all 145 cases (`http2` 94,
//! `hpack` 7, `generic` 44), and all 146 with `--strict`; the crate's test `h2spec` runs it.
//!
//! One thread per connection, blocking sockets; the process serves until killed.

use std::net::TcpListener;

#[path = "support/hello.rs"]
mod hello;

fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:18080".into());
    let listener = TcpListener::bind(&addr).expect("bind");
    for sock in listener.incoming().flatten() {
        std::thread::spawn(move || hello::serve(sock));
    }
}
