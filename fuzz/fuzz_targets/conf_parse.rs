//! Fuzzes the configuration lexer and parser: any bytes must give directives or an error, never a
//! panic, a hang or a stack overflow.
//!
//! Inputs that mention `include` are skipped: they would make the parser read whatever files of
//! the fuzzing machine the input names (a directive can only be named `include` if those seven
//! bytes appear literally, since no escape produces a letter). `include` is covered by the
//! crate's tests on temporary files.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    if data.windows(7).any(|w| w == b"include") {
        return;
    }
    let text = String::from_utf8_lossy(data);
    let prefix = Path::new("/nonexistent");
    // As a file (length limits, blocks) and as `-g` (no blocks, no limits).
    if let Ok(parsed) = shoal_conf::parse_str(&text, Some(Path::new("/f.conf")), prefix) {
        assert!(parsed.directives.len() <= text.len());
    }
    let _ = shoal_conf::parse_str(&text, None, prefix);
});
