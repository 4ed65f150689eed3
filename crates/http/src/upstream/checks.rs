//! What the roads share once the lines are found: framing headers (`Content-Length`,
//! `Transfer-Encoding`) by nginx 1.22's or 1.23's rules, duplicates, the head's values.

use super::*;

/// The header handlers: framing and connection, by `rules`.
pub(super) fn finish(
    head: Bytes,
    raw: RawHead,
    rules: Rules,
) -> Result<UpstreamHead, UpstreamError> {
    let mut content_length: Option<(HeaderSpan, Option<u64>)> = None;
    let mut transfer_encoding: Option<HeaderSpan> = None;
    let mut lengths = 0;
    let mut encodings = 0;
    let mut chunked = false;
    let mut exact_chunked = true;
    let mut close = raw.version < Version::Http11;
    let get = |s: Span| s.get(&head).to_vec();
    for h in &raw.headers {
        let name = h.name.get(&head);
        let value = h.value.get(&head);
        if name.eq_ignore_ascii_case(b"content-length") {
            let n = parse_content_length(value);
            if rules == Rules::Nginx123 {
                if let Some((prev, _)) = content_length {
                    return Err(duplicate(&get, *h, prev));
                }
                if transfer_encoding.is_some() {
                    return Err(UpstreamError::ContentLengthAndTransferEncoding);
                }
                if n.is_none() {
                    return Err(UpstreamError::InvalidContentLength {
                        name: name.to_vec(),
                        value: value.to_vec(),
                    });
                }
            }
            lengths += 1;
            content_length = Some((*h, n));
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            let exact = value.eq_ignore_ascii_case(b"chunked");
            if rules == Rules::Nginx123 {
                if let Some(prev) = transfer_encoding {
                    return Err(duplicate(&get, *h, prev));
                }
                if content_length.is_some() {
                    return Err(UpstreamError::ContentLengthAndTransferEncoding);
                }
                if !exact {
                    return Err(UpstreamError::UnknownTransferEncoding(value.to_vec()));
                }
            }
            encodings += 1;
            exact_chunked &= exact;
            chunked |= contains_ignore_case(value, b"chunked");
            transfer_encoding = Some(*h);
        } else if name.eq_ignore_ascii_case(b"connection") {
            close |= contains_ignore_case(value, b"close");
        }
    }
    let length = content_length.and_then(|(_, n)| n);
    let ambiguous = lengths > 1
        || encodings > 1
        || (lengths > 0 && encodings > 0)
        || (encodings > 0 && !exact_chunked)
        || (lengths > 0 && length.is_none());
    Ok(UpstreamHead {
        version: raw.version,
        status: raw.status,
        status_line: Text::In(raw.status_line),
        reason: Text::In(raw.reason),
        headers: raw.headers,
        // nginx clears the length of a chunked response.
        content_length: if chunked { None } else { length },
        chunked,
        connection_close: close,
        ambiguous,
        head,
    })
}

pub(super) fn duplicate(
    get: &dyn Fn(Span) -> Vec<u8>,
    h: HeaderSpan,
    prev: HeaderSpan,
) -> UpstreamError {
    UpstreamError::DuplicateHeader {
        name: get(h.name),
        value: get(h.value),
        previous_name: get(prev.name),
        previous_value: get(prev.value),
    }
}
