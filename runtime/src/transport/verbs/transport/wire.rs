//! What travels: the 32-bit immediates, the requests written into mailbox slots, and the
//! address blob wire-up publishes.

use std::fmt::Write as _;

use crate::transport::{CmpOp, NodeId, NodeSet};

use super::super::provider::QpEndpoint;

/// Requests a node may have outstanding towards one peer (mailbox slots per peer). Also
/// bounds the receives and send work requests a queue pair needs.
pub const SLOTS: u32 = 64;
const SLOT_BITS: u32 = 8;
const EVENT_BITS: u32 = 22;
/// Events must fit the immediate (event + 1, 0 = no event).
pub const MAX_EVENTS: u32 = (1 << EVENT_BITS) - 2;

/// The immediate of a write with immediate: `kind:2 | slot:8 | event+1:22`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Imm {
    /// The data of an Xfer-And-Signal is in place: signal `event`, answer `slot`.
    Xfer { slot: u32, event: Option<u32> },
    /// A request is in the sender's mailbox slot `slot`: run it, answer `slot`.
    Request { slot: u32 },
    /// The answer to this node's request in `slot` is in its answer word.
    Answer { slot: u32 },
    /// The sender closed its endpoint.
    Bye,
    /// The sender's endpoint broke: the job's fabric is unusable.
    Abort,
}

impl Imm {
    pub fn encode(self) -> u32 {
        let pack = |kind: u32, slot: u32, low: u32| kind << 30 | slot << EVENT_BITS | low;
        match self {
            Imm::Xfer { slot, event } => pack(0, slot, event.map_or(0, |e| e + 1)),
            Imm::Request { slot } => pack(1, slot, 0),
            Imm::Answer { slot } => pack(2, slot, 0),
            Imm::Bye => pack(3, 0, 0),
            Imm::Abort => pack(3, 0, 1),
        }
    }

    pub fn decode(imm: u32) -> Imm {
        let slot = (imm >> EVENT_BITS) & ((1 << SLOT_BITS) - 1);
        let low = imm & ((1 << EVENT_BITS) - 1);
        match imm >> 30 {
            0 => Imm::Xfer {
                slot,
                event: low.checked_sub(1),
            },
            1 => Imm::Request { slot },
            2 => Imm::Answer { slot },
            _ if low == 1 => Imm::Abort,
            _ => Imm::Bye,
        }
    }
}

/// A request in a mailbox slot (its answer is one 64-bit word).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Compare a variable here (and, when it holds, write in the same step): answers 1/0.
    Compare {
        var: usize,
        op: CmpOp,
        value: u64,
        write: Option<(usize, u64)>,
    },
    /// Store a variable here: answers 1.
    Store { var: usize, value: u64 },
    /// To the coordinator: run a whole Compare-And-Write: answers 1/0.
    Caw {
        var: usize,
        op: CmpOp,
        value: u64,
        dest: NodeSet,
        write: Option<(usize, u64)>,
    },
}

/// Bytes of one mailbox slot for a job of `nodes` nodes (7 words + the destination bitmap).
pub fn slot_size(nodes: u32) -> usize {
    8 * (7 + nodes.div_ceil(64) as usize)
}

fn op_code(op: CmpOp) -> u64 {
    match op {
        CmpOp::Ge => 0,
        CmpOp::Lt => 1,
        CmpOp::Eq => 2,
        CmpOp::Ne => 3,
    }
}

fn op_of(code: u64) -> Option<CmpOp> {
    Some(match code {
        0 => CmpOp::Ge,
        1 => CmpOp::Lt,
        2 => CmpOp::Eq,
        3 => CmpOp::Ne,
        _ => return None,
    })
}

impl Request {
    /// The slot's bytes (`slot_size(nodes)` of them).
    pub fn encode(&self, nodes: u32) -> Vec<u8> {
        let mut w = vec![0u64; slot_size(nodes) / 8];
        let write_words = |w: &mut [u64], write: Option<(usize, u64)>| {
            if let Some((var, value)) = write {
                w[4] = 1;
                w[5] = var as u64;
                w[6] = value;
            }
        };
        match self {
            Request::Compare {
                var,
                op,
                value,
                write,
            } => {
                w[..4].copy_from_slice(&[1, *var as u64, op_code(*op), *value]);
                write_words(&mut w, *write);
            }
            Request::Store { var, value } => w[..3].copy_from_slice(&[2, *var as u64, *value]),
            Request::Caw {
                var,
                op,
                value,
                dest,
                write,
            } => {
                w[..4].copy_from_slice(&[3, *var as u64, op_code(*op), *value]);
                write_words(&mut w, *write);
                for n in dest.iter() {
                    w[7 + n as usize / 64] |= 1 << (n % 64);
                }
            }
        }
        w.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// Parses a slot; `None` for bytes no sender writes (a protocol error).
    pub fn decode(bytes: &[u8], nodes: u32) -> Option<Request> {
        let w: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        if w.len() < slot_size(nodes) / 8 {
            return None;
        }
        let var = usize::try_from(w[1]).ok()?;
        let write = match w[4] {
            0 => None,
            1 => Some((usize::try_from(w[5]).ok()?, w[6])),
            _ => return None,
        };
        match w[0] {
            1 => Some(Request::Compare {
                var,
                op: op_of(w[2])?,
                value: w[3],
                write,
            }),
            2 => Some(Request::Store { var, value: w[2] }),
            3 => {
                let dest = NodeSet::from_nodes(
                    (0..nodes).filter(|&n| w[7 + n as usize / 64] & (1 << (n % 64)) != 0),
                );
                Some(Request::Caw {
                    var,
                    op: op_of(w[2])?,
                    value: w[3],
                    dest,
                    write,
                })
            }
            _ => None,
        }
    }
}

/// What one node publishes at wire-up: the job shape it was built for (checked), its
/// region, and for every peer the queue pair that peer must connect to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Address {
    pub node: NodeId,
    pub nodes: u32,
    pub global_size: usize,
    pub events: u32,
    /// The region's address and rkey, and its length.
    pub addr: u64,
    pub rkey: u32,
    pub len: usize,
    /// Indexed by node; this node's own entry is unused (`None`).
    pub qps: Vec<Option<QpEndpoint>>,
}

const MAGIC: &str = "strobe-verbs/1";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn unhex16(s: &str) -> Option<[u8; 16]> {
    if s.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

impl Address {
    /// One line of text: `strobe-verbs/1 node nodes global events addr rkey len` then one
    /// `qpn:psn:lid:gid` (or `-`) per node, space separated; numbers in hex.
    pub fn encode(&self) -> String {
        let mut s = format!(
            "{MAGIC} {:x} {:x} {:x} {:x} {:x} {:x} {:x}",
            self.node, self.nodes, self.global_size, self.events, self.addr, self.rkey, self.len
        );
        for qp in &self.qps {
            match qp {
                Some(q) => {
                    let _ = write!(s, " {:x}:{:x}:{:x}:{}", q.qpn, q.psn, q.lid, hex(&q.gid));
                }
                None => s.push_str(" -"),
            }
        }
        s
    }

    pub fn decode(text: &str) -> Result<Address, String> {
        let bad = || format!("not a strobe verbs address: {text:?}");
        let mut it = text.split_ascii_whitespace();
        if it.next() != Some(MAGIC) {
            return Err(bad());
        }
        let mut num = || {
            it.next()
                .and_then(|t| u64::from_str_radix(t, 16).ok())
                .ok_or_else(bad)
        };
        let node = u32::try_from(num()?).map_err(|_| bad())?;
        let nodes = u32::try_from(num()?).map_err(|_| bad())?;
        let global_size = usize::try_from(num()?).map_err(|_| bad())?;
        let events = u32::try_from(num()?).map_err(|_| bad())?;
        let addr = num()?;
        let rkey = u32::try_from(num()?).map_err(|_| bad())?;
        let len = usize::try_from(num()?).map_err(|_| bad())?;
        let qps = it
            .map(|t| {
                if t == "-" {
                    return Ok(None);
                }
                let f: Vec<&str> = t.split(':').collect();
                let [qpn, psn, lid, gid] = f[..] else {
                    return Err(bad());
                };
                Ok(Some(QpEndpoint {
                    qpn: u32::from_str_radix(qpn, 16).map_err(|_| bad())?,
                    psn: u32::from_str_radix(psn, 16).map_err(|_| bad())?,
                    lid: u16::from_str_radix(lid, 16).map_err(|_| bad())?,
                    gid: unhex16(gid).ok_or_else(bad)?,
                }))
            })
            .collect::<Result<Vec<_>, String>>()?;
        if qps.len() != nodes as usize || node >= nodes {
            return Err(bad());
        }
        Ok(Address {
            node,
            nodes,
            global_size,
            events,
            addr,
            rkey,
            len,
            qps,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn immediates_round_trip() {
        for imm in [
            Imm::Xfer {
                slot: 63,
                event: Some(MAX_EVENTS - 1),
            },
            Imm::Xfer {
                slot: 0,
                event: None,
            },
            Imm::Request { slot: 17 },
            Imm::Answer { slot: 255 },
            Imm::Bye,
            Imm::Abort,
        ] {
            assert_eq!(Imm::decode(imm.encode()), imm);
        }
    }

    #[test]
    fn requests_round_trip() {
        let nodes = 130;
        for r in [
            Request::Compare {
                var: 8,
                op: CmpOp::Ne,
                value: 7,
                write: Some((16, 9)),
            },
            Request::Store { var: 24, value: 3 },
            Request::Caw {
                var: 0,
                op: CmpOp::Lt,
                value: u64::MAX,
                dest: NodeSet::from_nodes([0, 63, 64, 129]),
                write: None,
            },
        ] {
            assert_eq!(Request::decode(&r.encode(nodes), nodes), Some(r));
        }
        assert_eq!(Request::decode(&[0xff; 80], 2), None);
    }

    #[test]
    fn addresses_round_trip_and_garbage_is_refused() {
        let a = Address {
            node: 1,
            nodes: 3,
            global_size: 4096,
            events: 10,
            addr: 0x7f00_1234_0000,
            rkey: 0xabcd,
            len: 9000,
            qps: vec![
                Some(QpEndpoint {
                    qpn: 0x101,
                    psn: 0xfff,
                    lid: 2,
                    gid: [7; 16],
                }),
                None,
                Some(QpEndpoint {
                    qpn: 0x102,
                    psn: 1,
                    lid: 2,
                    gid: [0; 16],
                }),
            ],
        };
        assert_eq!(Address::decode(&a.encode()), Ok(a.clone()));
        assert!(Address::decode("strobe-verbs/1 1 2").is_err());
        assert!(Address::decode("hello").is_err());
        let cut = a.encode().rsplit_once(' ').unwrap().0.to_string();
        assert!(Address::decode(&cut).is_err());
    }
}
