//! The framing of the shim's conversation with netplug-node. Our own, not HTTP: a frame is a
//! 4-byte big-endian length, then that many bytes. Both sides bound a frame's size, so neither
//! ever allocates what a broken or hostile peer announces. (ts/node/cni-frames.ts is the agent's
//! side of the bytes after the request.)

use std::io::{self, Read};

/// The largest frame either side sends or accepts: 16 MiB, far above any netconf or result.
pub const MAX_FRAME: usize = 16 << 20;

/// Appends one frame holding `bytes` to `out` (the shim sends its frames in one write).
pub fn push_frame(out: &mut Vec<u8>, bytes: &[u8]) -> io::Result<()> {
    if bytes.len() > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a frame of {} bytes is more than the {MAX_FRAME} allowed", bytes.len()),
        ));
    }
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
    Ok(())
}

/// Writes one frame holding `bytes` (the agent's side; the shim's tests play it).
pub fn write_frame(w: &mut impl std::io::Write, bytes: &[u8]) -> io::Result<()> {
    let mut out = Vec::with_capacity(4 + bytes.len());
    push_frame(&mut out, bytes)?;
    w.write_all(&out)
}

/// Reads one frame; a length above `limit` is an error before anything is allocated, and a
/// stream that ends inside a frame is `UnexpectedEof`.
pub fn read_frame(r: &mut impl Read, limit: usize) -> io::Result<Vec<u8>> {
    let mut header = [0u8; 4];
    r.read_exact(&mut header)?;
    let len = u32::from_be_bytes(header) as usize;
    if len > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the peer announced a frame of {len} bytes, more than the {limit} allowed"),
        ));
    }
    let mut bytes = vec![0u8; len];
    r.read_exact(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_is_a_big_endian_length_then_the_bytes() {
        let mut out = Vec::new();
        write_frame(&mut out, b"hello").unwrap();
        assert_eq!(out, [0, 0, 0, 5, b'h', b'e', b'l', b'l', b'o']);
        let mut empty = Vec::new();
        write_frame(&mut empty, b"").unwrap();
        assert_eq!(empty, [0, 0, 0, 0]);
    }

    #[test]
    fn frames_read_back_in_order() {
        let mut out = Vec::new();
        push_frame(&mut out, b"{\"exitCode\":0}").unwrap();
        push_frame(&mut out, b"").unwrap();
        push_frame(&mut out, &[0, 255, 10]).unwrap();
        let mut input = out.as_slice();
        assert_eq!(read_frame(&mut input, MAX_FRAME).unwrap(), b"{\"exitCode\":0}");
        assert_eq!(read_frame(&mut input, MAX_FRAME).unwrap(), b"");
        assert_eq!(read_frame(&mut input, MAX_FRAME).unwrap(), [0, 255, 10]);
        assert_eq!(read_frame(&mut input, MAX_FRAME).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn an_announced_length_above_the_limit_is_refused_before_reading_it() {
        let mut input: &[u8] = &[0x01, 0x00, 0x00, 0x01];
        let err = read_frame(&mut input, MAX_FRAME).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("16777217 bytes"), "{err}");
    }

    #[test]
    fn a_stream_ending_inside_a_frame_is_an_unexpected_end() {
        let mut input: &[u8] = &[0, 0, 0, 9, b'a', b'b'];
        assert_eq!(read_frame(&mut input, MAX_FRAME).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        let mut header_only: &[u8] = &[0, 0];
        assert_eq!(read_frame(&mut header_only, MAX_FRAME).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn a_frame_above_the_limit_is_not_sent() {
        let big = vec![0u8; MAX_FRAME + 1];
        let mut out = Vec::new();
        assert_eq!(push_frame(&mut out, &big).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert!(out.is_empty());
        push_frame(&mut out, &big[..MAX_FRAME]).unwrap();
        assert_eq!(out.len(), MAX_FRAME + 4);
    }
}
