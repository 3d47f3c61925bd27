//! Frames on a node link: `header length (u32 LE) | payload length (u32 LE) | header |
//! payload`. The header is one packed Cap'n Proto `LinkMessage` (the schema crate encodes
//! it); the payload is raw bytes (an Xfer-And-Signal's data, empty otherwise), so bulk data
//! is never copied through a Cap'n Proto builder.

use std::io::{self, Read, Write};
use std::net::TcpStream;

use strobe_schema::{decode_link_message, encode_link_message, LinkMessage};

/// The largest header accepted: a Compare-And-Write request naming 100,000 nodes fits.
pub const MAX_HEADER: usize = 1 << 20;

/// One received frame.
#[derive(Debug)]
pub struct Frame {
    pub message: LinkMessage,
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
    let mut payload = vec![0u8; payload_len];
    stream.read_exact(&mut payload)?;
    Ok(Some((header, payload)))
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
}
