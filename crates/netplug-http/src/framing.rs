//! Where an HTTP/1.1 response ends: after its headers and a `Content-Length` body, or after the
//! last chunk of a chunked body. etcd's gateway sends one or the other.

use crate::{Error, ErrorKind, Result};

/// The length of the complete response at the start of `data`, or `None` while bytes are missing.
pub fn response_length(data: &[u8]) -> Result<Option<usize>> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut response = httparse::Response::new(&mut headers);
    let head = match response.parse(data) {
        Ok(httparse::Status::Complete(length)) => length,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(err) => return Err(protocol(format!("not an HTTP response: {err}"))),
    };
    let header = |name: &str| response.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value);
    if let Some(value) = header("content-length") {
        let length: usize = std::str::from_utf8(value)
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .ok_or_else(|| protocol("a Content-Length that is not a number".into()))?;
        return Ok((data.len() >= head + length).then_some(head + length));
    }
    if header("transfer-encoding").is_some_and(|value| value.eq_ignore_ascii_case(b"chunked")) {
        return chunked_length(data, head);
    }
    Err(protocol("a response with neither Content-Length nor chunked encoding".into()))
}

fn chunked_length(data: &[u8], mut offset: usize) -> Result<Option<usize>> {
    loop {
        let Some(line_end) = find_crlf(&data[offset..]).map(|i| offset + i) else {
            return Ok(None);
        };
        let size_text = std::str::from_utf8(&data[offset..line_end]).map_err(|_| protocol("a malformed chunk size".into()))?;
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| protocol(format!("a malformed chunk size \"{size_text}\"")))?;
        let next = line_end + 2 + size + 2;
        if size == 0 {
            // The last chunk, then (no trailers from etcd) the final CRLF.
            return Ok((data.len() >= line_end + 4).then_some(line_end + 4));
        }
        if data.len() < next {
            return Ok(None);
        }
        offset = next;
    }
}

fn find_crlf(data: &[u8]) -> Option<usize> {
    data.windows(2).position(|w| w == b"\r\n")
}

fn protocol(message: String) -> Error {
    Error::new(ErrorKind::Protocol, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_length_responses_end_after_their_body() {
        let full = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        assert_eq!(response_length(full).unwrap(), Some(full.len()));
        assert_eq!(response_length(&full[..full.len() - 1]).unwrap(), None);
        assert_eq!(response_length(&full[..10]).unwrap(), None);
        let pipelined = [&full[..], b"HTTP/1.1"].concat();
        assert_eq!(response_length(&pipelined).unwrap(), Some(full.len()));
    }

    #[test]
    fn chunked_responses_end_after_the_last_chunk() {
        let full = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;x=y\r\nabc\r\n0\r\n\r\n";
        assert_eq!(response_length(full).unwrap(), Some(full.len()));
        for cut in 1..full.len() {
            assert_eq!(response_length(&full[..cut]).unwrap(), None, "cut at {cut}");
        }
    }

    #[test]
    fn other_bytes_are_protocol_errors() {
        assert_eq!(response_length(b"SSH-2.0-OpenSSH\r\n\r\n").unwrap_err().kind, ErrorKind::Protocol);
        assert_eq!(response_length(b"HTTP/1.1 200 OK\r\n\r\n").unwrap_err().kind, ErrorKind::Protocol);
        assert_eq!(response_length(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").unwrap_err().kind, ErrorKind::Protocol);
    }
}
