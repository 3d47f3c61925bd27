//! The Cap'n Proto decoders (`strobe-schema`): a recording's decision-set blobs and the
//! node managers' messages. Any bytes: an error or a value, never a panic; a value that
//! decodes re-encodes to a blob that decodes to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strobe_schema::{decode_node_message, decode_slice_decisions, encode_slice_decisions};

fuzz_target!(|data: &[u8]| {
    if let Ok(sd) = decode_slice_decisions(data) {
        let again = decode_slice_decisions(&encode_slice_decisions(&sd)).expect("re-decode");
        assert_eq!(again, sd);
    }
    let _ = decode_node_message(data);
});
