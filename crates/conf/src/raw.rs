//! Bytes that are not UTF-8, kept in text.
//!
//! nginx's configuration is bytes: a `map` on `$binary_remote_addr` is written with the
//! address's raw bytes in the file, and a `return` body may hold any byte. shoal's arguments and
//! values are `String`s, so a byte past 0x7f that is not part of valid UTF-8 is kept as a
//! private-use character (U+F780..U+F7FF, one per byte), the same the variables use for a
//! binary value (`$binary_remote_addr`): a key written with raw bytes compares equal to the
//! value, and [`raw_bytes_into`] gives the bytes back where an answer, a log or a hash takes
//! them.

/// The character of byte `b` (past 0x7f) is `RAW_BASE + b`.
const RAW_BASE: u32 = 0xF700;

/// Appends byte `b` of a binary value to `out`: itself below 0x80, else its private-use
/// character.
pub fn push_raw_byte(out: &mut String, b: u8) {
    if b < 0x80 {
        out.push(char::from(b));
    } else {
        out.push(char::from_u32(RAW_BASE + u32::from(b)).expect("a private-use character"));
    }
}

/// Appends `s` to `out` as bytes: its text as UTF-8, the characters of raw bytes
/// ([`push_raw_byte`]) as those bytes.
pub fn raw_bytes_into(s: &str, out: &mut Vec<u8>) {
    // Such a character's UTF-8 starts with 0xEF: most values have none.
    if !s.as_bytes().contains(&0xEF) {
        out.extend_from_slice(s.as_bytes());
        return;
    }
    let mut buf = [0u8; 4];
    for c in s.chars() {
        match u32::from(c).checked_sub(RAW_BASE + 0x80) {
            Some(n) if n < 0x80 => out.push((n + 0x80) as u8),
            _ => out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes()),
        }
    }
}

/// `bytes` as text: valid UTF-8 as it is, every other byte as its private-use character.
pub fn text_from_bytes(bytes: Vec<u8>) -> String {
    match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => {
            let bytes = e.into_bytes();
            let mut out = String::with_capacity(bytes.len() + 8);
            let mut rest = &bytes[..];
            while !rest.is_empty() {
                match std::str::from_utf8(rest) {
                    Ok(s) => {
                        out.push_str(s);
                        break;
                    }
                    Err(e) => {
                        let good = e.valid_up_to();
                        out.push_str(std::str::from_utf8(&rest[..good]).expect("checked"));
                        let bad = e.error_len().unwrap_or(rest.len() - good);
                        for &b in &rest[good..good + bad] {
                            push_raw_byte(&mut out, b);
                        }
                        rest = &rest[good + bad..];
                    }
                }
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_values_round_trip_through_text() {
        let mut s = String::from("k:");
        for b in [0xC0u8, 0xA8, 0x01, 0xFF, 0x80] {
            push_raw_byte(&mut s, b);
        }
        s.push('é');
        let mut out = Vec::new();
        raw_bytes_into(&s, &mut out);
        assert_eq!(out, b"k:\xC0\xA8\x01\xFF\x80\xC3\xA9");
        let mut plain = Vec::new();
        raw_bytes_into("plain é", &mut plain);
        assert_eq!(plain, "plain é".as_bytes());
    }

    #[test]
    fn invalid_utf8_round_trips_and_valid_stays_text() {
        let bytes = b"a\xC0\xA8\x01\xFFz\xC3\xA9\xE2\x82".to_vec();
        let text = text_from_bytes(bytes.clone());
        assert!(text.starts_with('a') && text.contains("z\u{e9}"));
        let mut back = Vec::new();
        raw_bytes_into(&text, &mut back);
        assert_eq!(back, bytes);
        assert_eq!(text_from_bytes("déjà".as_bytes().to_vec()), "déjà");
        // The same character `$binary_remote_addr` gives for 192.168.1.1.
        let mut addr = String::new();
        for b in [192u8, 168, 1, 1] {
            push_raw_byte(&mut addr, b);
        }
        assert_eq!(text_from_bytes(vec![192, 168, 1, 1]), addr);
    }
}
