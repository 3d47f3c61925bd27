//! The cost of the decision-set codec, for instruction counts under callgrind (repeatable
//! on a noisy machine): `cargo build --release -p strobe-schema --example encode_cost`, then
//! `valgrind --tool=callgrind target/release/examples/encode_cost FILE ROUNDS`, where FILE
//! holds one hex-encoded `slice_decisions` blob per line (e.g. `sqlite3 rec.db "SELECT
//! hex(decisions) FROM slice_decisions"`). Decodes every blob once, then encodes the whole
//! set ROUNDS times and decodes it ROUNDS times; prints how many decisions went through.

use strobe_schema::{decode_slice_decisions, encode_slice_decisions};

fn unhex(line: &str) -> Vec<u8> {
    (0..line.len() / 2)
        .map(|i| u8::from_str_radix(&line[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: encode_cost FILE ROUNDS");
    let rounds: usize = args.next().map_or(100, |r| r.parse().expect("ROUNDS"));
    let text = std::fs::read_to_string(&path).expect("read FILE");
    let sets: Vec<_> = text
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| decode_slice_decisions(&unhex(l.trim())).expect("decodes"))
        .collect();
    let per_round: usize = sets.iter().map(|s| s.decisions.len()).sum();
    let mut bytes = 0usize;
    let mut encoded = Vec::new();
    for _ in 0..rounds {
        encoded = sets.iter().map(encode_slice_decisions).collect::<Vec<_>>();
        bytes += encoded.iter().map(Vec::len).sum::<usize>();
    }
    let mut decoded = 0usize;
    for _ in 0..rounds {
        for e in &encoded {
            decoded += decode_slice_decisions(e)
                .expect("round trip")
                .decisions
                .len();
        }
    }
    println!(
        "{} sets, {per_round} decisions per round, {rounds} rounds: {bytes} bytes encoded, {decoded} decisions decoded",
        sets.len()
    );
}
