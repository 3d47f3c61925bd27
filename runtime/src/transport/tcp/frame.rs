//! Frames on a node link: `header length (u32 LE) | payload length (u32 LE) | header |
//! payload`. The header is one packed Cap'n Proto `LinkMessage` (the schema crate encodes
//! it); the payload is raw bytes (an Xfer-And-Signal's data, empty otherwise), so bulk data
//! is never copied through a Cap'n Proto builder.

use std::io::{self, Read, Write};
use std::net::TcpStream;

use strobe_schema::{decode_link_message, encode_link_message, LinkMessage};

/// The largest header accepted: a Compare-And-Write request naming 100,000 nodes fits.
pub const MAX_HEADER: usize = 1 << 20;

/// One received frame (the handshake's: node links read a frame's head first,
/// [`read_head`], and put an Xfer-And-Signal's payload straight into global memory).
#[derive(Debug)]
pub struct Frame {
    pub message: LinkMessage,
    /// Empty in every handshake message (their reader allows no payload).
    #[allow(dead_code)]
    pub payload: Vec<u8>,
}

/// Builds the bytes of one frame, so it goes out in one `write` (Nagle is off: two writes
/// could mean two segments).
pub fn encode(message: &LinkMessage, payload: &[u8]) -> Vec<u8> {
    frame_bytes(&encode_link_message(message), payload)
}

/// The bytes of one frame of this layout with an already encoded header (the node links'
/// `LinkMessage`, the control connections' `ControlMessage`: `daemon/control.rs`).
pub(crate) fn frame_bytes(header: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + header.len() + payload.len());
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(header);
    out.extend_from_slice(payload);
    out
}

/// The 8 length bytes and the encoded header of a frame whose payload (`payload_len`
/// bytes) is written after them straight from the caller's buffer ([`write_parts`]): the
/// payload is never copied into a frame buffer.
pub fn head(message: &LinkMessage, payload_len: usize) -> Vec<u8> {
    let header = encode_link_message(message);
    let mut out = Vec::with_capacity(8 + header.len());
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(&(payload_len as u32).to_le_bytes());
    out.extend_from_slice(&header);
    out
}

/// Writes `head` then `payload` with vectored writes (one system call for a small frame).
pub fn write_parts(out: &mut impl Write, head: &[u8], payload: &[u8]) -> io::Result<()> {
    let mut parts = [io::IoSlice::new(head), io::IoSlice::new(payload)];
    let mut left: &mut [io::IoSlice<'_>] = &mut parts;
    while !left.is_empty() {
        match out.write_vectored(left) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => io::IoSlice::advance_slices(&mut left, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A frame's header, read; its payload (`payload_len` bytes) is still in the stream, for
/// the caller to read where it belongs ([`read_payload`], or straight into global memory).
pub struct Head {
    pub message: LinkMessage,
    pub payload_len: usize,
}

/// Reads the lengths and the header of one frame whose payload is at most `max_payload`
/// bytes. `Ok(None)` on a clean end of stream before the frame starts.
pub fn read_head(stream: &mut impl Read, max_payload: usize) -> io::Result<Option<Head>> {
    let limits = Limits {
        what: "frame",
        max_header: MAX_HEADER,
        max_payload,
        payload_limit: "the global memory",
    };
    let Some((header, payload_len)) = read_lengths_and_header(stream, &limits)? else {
        return Ok(None);
    };
    let message = decode_link_message(&header).map_err(|e| invalid(e.to_string()))?;
    Ok(Some(Head {
        message,
        payload_len,
    }))
}

/// Reads a payload whose header [`read_head`] read.
pub fn read_payload(stream: &mut impl Read, len: usize) -> io::Result<Vec<u8>> {
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload)?;
    Ok(payload)
}

/// Writes one frame.
pub fn write(stream: &mut TcpStream, message: &LinkMessage, payload: &[u8]) -> io::Result<()> {
    stream.write_all(&encode(message, payload))
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// Reads one frame whose payload is at most `max_payload` bytes. `Ok(None)` on a clean end
/// of stream before the frame starts.
pub fn read(stream: &mut impl Read, max_payload: usize) -> io::Result<Option<Frame>> {
    let limits = Limits {
        what: "frame",
        max_header: MAX_HEADER,
        max_payload,
        payload_limit: "the global memory",
    };
    let Some((header, payload)) = read_raw(stream, &limits)? else {
        return Ok(None);
    };
    let message = decode_link_message(&header).map_err(|e| invalid(e.to_string()))?;
    Ok(Some(Frame { message, payload }))
}

/// What a reader accepts, and how its errors name the frame and the payload's limit.
pub(crate) struct Limits {
    pub what: &'static str,
    pub max_header: usize,
    pub max_payload: usize,
    pub payload_limit: &'static str,
}

/// Reads one raw frame (header bytes, payload bytes) within `limits`: `Ok(None)` on a clean
/// end of stream before it starts. Lengths out of bounds are `InvalidData`, checked before
/// anything is allocated.
pub(crate) fn read_raw(
    stream: &mut impl Read,
    limits: &Limits,
) -> io::Result<Option<(Vec<u8>, Vec<u8>)>> {
    let Some((header, payload_len)) = read_lengths_and_header(stream, limits)? else {
        return Ok(None);
    };
    let payload = read_payload(stream, payload_len)?;
    Ok(Some((header, payload)))
}

/// The lengths (checked against `limits` before anything is allocated) and the header.
fn read_lengths_and_header(
    stream: &mut impl Read,
    limits: &Limits,
) -> io::Result<Option<(Vec<u8>, usize)>> {
    let mut lens = [0u8; 8];
    let mut got = 0;
    while got < lens.len() {
        match stream.read(&mut lens[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let header_len = u32::from_le_bytes(lens[..4].try_into().expect("4 bytes")) as usize;
    let payload_len = u32::from_le_bytes(lens[4..].try_into().expect("4 bytes")) as usize;
    let what = limits.what;
    if header_len == 0 || header_len > limits.max_header {
        return Err(invalid(format!("{what} header of {header_len} bytes")));
    }
    if payload_len > limits.max_payload {
        return Err(invalid(format!(
            "{what} payload of {payload_len} bytes exceeds {} ({} bytes)",
            limits.payload_limit, limits.max_payload
        )));
    }
    let mut header = vec![0u8; header_len];
    stream.read_exact(&mut header)?;
    Ok(Some((header, payload_len)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_bad_lengths_are_refused() {
        let m = LinkMessage::Xfer {
            request: 3,
            offset: 8,
            remote_event: Some(1),
        };
        let bytes = encode(&m, b"hello");
        let f = read(&mut &bytes[..], 5).unwrap().unwrap();
        assert_eq!(f.message, m);
        assert_eq!(f.payload, b"hello");
        assert!(read(&mut &bytes[..], 4).is_err(), "payload over the limit");
        assert!(
            read(&mut &bytes[..bytes.len() - 1], 5).is_err(),
            "cut short"
        );
        assert!(read(&mut &b""[..], 5).unwrap().is_none(), "clean end");
        let mut huge = bytes.clone();
        huge[..4].copy_from_slice(&(MAX_HEADER as u32 + 1).to_le_bytes());
        assert!(read(&mut &huge[..], 5).is_err(), "header over the limit");
    }

    #[test]
    fn a_frame_written_in_parts_reads_as_one() {
        let m = LinkMessage::Xfer {
            request: 0,
            offset: 16,
            remote_event: None,
        };
        let payload: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let mut out = Vec::new();
        write_parts(&mut out, &head(&m, payload.len()), &payload).unwrap();
        assert_eq!(
            out,
            encode(&m, &payload),
            "the same bytes as one encoded frame"
        );
        let mut input = &out[..];
        let h = read_head(&mut input, payload.len()).unwrap().unwrap();
        assert_eq!((h.message, h.payload_len), (m, payload.len()));
        assert_eq!(read_payload(&mut input, h.payload_len).unwrap(), payload);
        assert!(
            read_head(&mut &out[..], 99_999).is_err(),
            "payload over the limit"
        );
    }
}
