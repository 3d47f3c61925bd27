//! The compact schedule log's decoders (`strobe_recorder::compact`, format 13): any bytes
//! are an error or a value, never a panic; what decodes re-encodes to bytes that decode to
//! the same encoding (re-encoding drops what the codec does not keep, so the property is
//! on the encoding). Packed blobs (format 15): unpacking any bytes is an error or a plain
//! blob, and packing any plain blob unpacks to it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strobe_recorder::compact::{
    decode_decisions, decode_descriptors, encode_decisions, encode_descriptors, pack, unpack,
    CODEC_VERSION,
};

fuzz_target!(|data: &[u8]| {
    if let Ok((decisions, wake)) = decode_decisions(data) {
        let once = encode_decisions(&decisions, &wake);
        let (d2, w2) = decode_decisions(&once).expect("re-decode");
        assert_eq!(encode_decisions(&d2, &w2), once);
    }
    if let Ok(ds) = decode_descriptors(data) {
        let once = encode_descriptors(&ds);
        let again = decode_descriptors(&once).expect("re-decode");
        assert_eq!(encode_descriptors(&again), once);
    }
    let _ = unpack(data);
    let mut plain = vec![CODEC_VERSION];
    plain.extend_from_slice(data);
    let packed = pack(plain.clone());
    assert!(packed.len() <= plain.len());
    assert_eq!(&*unpack(&packed).expect("unpack what was packed"), &plain[..]);
});
