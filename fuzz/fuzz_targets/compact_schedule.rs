//! The compact schedule log's decoders (`strobe_recorder::compact`, format 13): any bytes
//! are an error or a value, never a panic; what decodes re-encodes to bytes that decode to
//! the same encoding (re-encoding drops what the codec does not keep, so the property is
//! on the encoding).
#![no_main]

use libfuzzer_sys::fuzz_target;
use strobe_recorder::compact::{
    decode_decisions, decode_descriptors, encode_decisions, encode_descriptors,
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
});
