//! The visitor and its inverse agree; the one-line text is readable and tells decisions apart.

use std::collections::{BTreeSet, VecDeque};
use std::convert::Infallible;

use super::golden_tests::corpus;
use super::*;
use crate::descriptor::{Completion, DescKind, DescRef};

/// One visited field.
#[derive(Clone, Debug, PartialEq)]
enum Value {
    Desc(DescRef),
    U32(u32),
    U64(u64),
    I32(i32),
    Bool(bool),
    CollKind(DescKind),
    Error(u32),
    Descs(Vec<DescRef>),
    U32s(Vec<u32>),
}

/// Records a visit; then answers `Decision::read` from the record, checking that it asks
/// for the same fields in the same order with the same types.
#[derive(Default)]
struct Tape {
    kind: Option<DecisionKind>,
    fields: VecDeque<(&'static str, Value)>,
}

impl DecisionVisitor for Tape {
    fn kind(&mut self, kind: DecisionKind) {
        assert!(self.kind.replace(kind).is_none(), "kind comes once, first");
        assert!(self.fields.is_empty(), "kind comes first");
    }
    fn desc(&mut self, field: &'static str, v: DescRef) {
        self.fields.push_back((field, Value::Desc(v)));
    }
    fn u32(&mut self, field: &'static str, v: u32) {
        self.fields.push_back((field, Value::U32(v)));
    }
    fn u64(&mut self, field: &'static str, v: u64) {
        self.fields.push_back((field, Value::U64(v)));
    }
    fn i32(&mut self, field: &'static str, v: i32) {
        self.fields.push_back((field, Value::I32(v)));
    }
    fn bool(&mut self, field: &'static str, v: bool) {
        self.fields.push_back((field, Value::Bool(v)));
    }
    fn coll_kind(&mut self, field: &'static str, v: DescKind) {
        self.fields.push_back((field, Value::CollKind(v)));
    }
    fn error(&mut self, field: &'static str, v: u32) {
        self.fields.push_back((field, Value::Error(v)));
    }
    fn desc_list(&mut self, field: &'static str, v: &[DescRef]) {
        self.fields.push_back((field, Value::Descs(v.to_vec())));
    }
    fn u32_list(&mut self, field: &'static str, v: &[u32]) {
        self.fields.push_back((field, Value::U32s(v.to_vec())));
    }
}

impl Tape {
    fn next(&mut self, field: &'static str) -> Value {
        let (name, v) = self
            .fields
            .pop_front()
            .expect("read asks for no more fields");
        assert_eq!(
            name, field,
            "read and visit name the fields in the same order"
        );
        v
    }
}

macro_rules! tape_read {
    ($name:ident, $t:ty, $variant:ident) => {
        fn $name(&mut self, field: &'static str) -> Result<$t, Infallible> {
            match self.next(field) {
                Value::$variant(v) => Ok(v),
                other => panic!(
                    "visit gave {field} as {other:?}, read wants a {}",
                    stringify!($t)
                ),
            }
        }
    };
}

impl DecisionSource for Tape {
    type Error = Infallible;
    tape_read!(desc, DescRef, Desc);
    tape_read!(u32, u32, U32);
    tape_read!(u64, u64, U64);
    tape_read!(i32, i32, I32);
    tape_read!(bool, bool, Bool);
    tape_read!(coll_kind, DescKind, CollKind);
    tape_read!(error, u32, Error);
    tape_read!(desc_list, Vec<DescRef>, Descs);
    tape_read!(u32_list, Vec<u32>, U32s);
}

#[test]
fn read_is_the_inverse_of_visit_for_every_kind() {
    let corpus = corpus();
    let kinds: BTreeSet<u8> = corpus.iter().map(|d| d.kind() as u8).collect();
    assert_eq!(
        kinds.len(),
        DecisionKind::ALL.len(),
        "the corpus has every kind"
    );
    for d in corpus {
        let mut tape = Tape::default();
        d.visit(&mut tape);
        let kind = tape.kind.expect("visit starts with the kind");
        assert_eq!(kind, d.kind());
        let back = Decision::read(kind, &mut tape).unwrap();
        assert!(tape.fields.is_empty(), "read uses every visited field");
        assert_eq!(back, d);
    }
}

fn r(rank: u32, seq: u64) -> DescRef {
    DescRef { rank, seq }
}

fn completed(completion: Completion) -> Decision {
    Decision::Complete(Completed {
        desc: r(1, 2),
        completion,
    })
}

#[test]
fn each_kind_reads_as_one_line() {
    let m = Decision::Match(Match {
        send: r(0, 3),
        recv: r(1, 2),
        bytes: 64,
        truncated: false,
    });
    assert_eq!(m.to_string(), "match send 0#3 -> recv 1#2, 64 bytes");
    let m = Decision::Match(Match {
        truncated: true,
        ..match m {
            Decision::Match(m) => m,
            _ => unreachable!(),
        }
    });
    assert_eq!(
        m.to_string(),
        "match send 0#3 -> recv 1#2, 64 bytes, truncated"
    );
    let c = Decision::Chunk(Chunk {
        send: r(0, 3),
        recv: r(1, 2),
        offset: 4096,
        len: 1024,
    });
    assert_eq!(
        c.to_string(),
        "chunk send 0#3 -> recv 1#2, 1024 bytes at offset 4096"
    );
    let run = |root, parts| {
        Decision::Collective(CollectiveRun {
            comm: 0,
            coll_seq: 4,
            kind: DescKind::Bcast,
            root,
            parts,
        })
        .to_string()
    };
    assert_eq!(
        run(2, vec![r(0, 5), r(1, 5)]),
        "collective MPI_Bcast #4 on comm 0, root 2: 0#5 1#5"
    );
    assert_eq!(run(-1, vec![]), "collective MPI_Bcast #4 on comm 0: none");
    let n = Decision::NewComm(NewComm {
        parent: 0,
        comm: 2,
        members: vec![3, 1, 0],
    });
    assert_eq!(n.to_string(), "new_comm 2 from comm 0: world ranks 3 1 0");
    let done = Completion {
        request: 7,
        source: 0,
        tag: 5,
        bytes: 64,
        ..Completion::default()
    };
    assert_eq!(
        completed(done).to_string(),
        "complete 1#2 req 7: source 0 tag 5, 64 bytes"
    );
    let odd = Completion {
        error: 1,
        flags: 3 | 8 | 0x20,
        value: 3,
        value2: (1 << 32) | 2,
        ..done
    };
    assert_eq!(
        completed(odd).to_string(),
        "complete 1#2 req 7: source 0 tag 5, 64 bytes, error truncate, cancelled, found, \
         inline, flags 0x20, new comm 3 rank 1 of 2"
    );
    let unknown = Completion {
        error: 77,
        value: u64::MAX,
        ..done
    };
    assert_eq!(
        completed(unknown).to_string(),
        "complete 1#2 req 7: source 0 tag 5, 64 bytes, error 77, new comm none rank 0 of 0"
    );
}

/// Divergence reports compare the text of decisions, so different decisions must read
/// differently: all of the corpus, and each decision with any one field changed.
#[test]
fn different_decisions_read_differently() {
    let mut texts = BTreeSet::new();
    let corpus = corpus();
    for d in &corpus {
        assert!(!d.to_string().contains('\n'));
        assert!(texts.insert(d.to_string()), "two decisions read {d}");
    }
    for d in corpus {
        let mut tape = Tape::default();
        d.visit(&mut tape);
        let kind = tape.kind.unwrap();
        for i in 0..tape.fields.len() {
            let mut changed = Tape {
                kind: Some(kind),
                fields: tape.fields.clone(),
            };
            bump(&mut changed.fields[i].1);
            let other = Decision::read(kind, &mut changed).unwrap();
            assert_ne!(other, d);
            assert_ne!(other.to_string(), d.to_string(), "field {i} of {d}");
        }
    }
}

/// Change a value (to a nearby one, which is the hard case for a text format).
fn bump(v: &mut Value) {
    match v {
        Value::Desc(d) => d.seq = d.seq.wrapping_add(1),
        Value::U32(x) | Value::Error(x) => *x = x.wrapping_add(1),
        Value::U64(x) => *x = x.wrapping_add(1),
        Value::I32(x) => *x = x.wrapping_add(1),
        Value::Bool(b) => *b = !*b,
        Value::CollKind(k) => {
            *k = if *k == DescKind::Barrier {
                DescKind::Bcast
            } else {
                DescKind::Barrier
            }
        }
        Value::Descs(l) => l.push(r(9, 9)),
        Value::U32s(l) => l.push(9),
    }
}
