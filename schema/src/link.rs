//! Node-link messages (schema `LinkMessage`): what the TCP transport's endpoints say to each
//! other, in plain Rust types. The frame layout (length prefixes, raw payload after the
//! header) belongs to the transport; this module only encodes and decodes the header.

use capnp::message::Builder;

use crate::convert::{check_version, reader, to_bytes, unknown};
use crate::generated::strobe_capnp as g;
use crate::{SchemaError, FORMAT_VERSION};

/// The comparisons of Compare-And-Write, as they travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkCmp {
    Ge,
    Lt,
    Eq,
    Ne,
}

/// One header on a node link (schema `LinkMessage`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkMessage {
    /// Handshake, acceptor -> connector: who accepts, its challenge.
    Hello { node: u32, nonce: Vec<u8> },
    /// Handshake, connector -> acceptor: who connects, the job's shape, its own challenge,
    /// its proof of the job secret.
    Auth {
        node: u32,
        nodes: u32,
        global_size: u64,
        events: u32,
        nonce: Vec<u8>,
        mac: Vec<u8>,
    },
    /// Handshake, acceptor -> connector: the acceptor's proof.
    Accept { mac: Vec<u8> },
    /// Xfer-And-Signal to the receiver: the frame's payload goes at `offset`.
    Xfer {
        request: u64,
        offset: u64,
        remote_event: Option<u32>,
    },
    /// Compare-And-Write, requester -> coordinator.
    CawRequest {
        request: u64,
        var: u64,
        op: LinkCmp,
        value: u64,
        dest: Vec<u32>,
        write: Option<(u64, u64)>,
    },
    /// Coordinator -> destination: compare (and, if `write` is set and it holds, write).
    Compare {
        request: u64,
        var: u64,
        op: LinkCmp,
        value: u64,
        write: Option<(u64, u64)>,
    },
    /// Coordinator -> destination: store a variable.
    Store { request: u64, var: u64, value: u64 },
    /// The answer to a request: `Ok(outcome)` or a refusal.
    Reply {
        request: u64,
        outcome: Result<bool, String>,
    },
    /// Orderly close.
    Goodbye,
}

fn cmp_to(op: LinkCmp) -> g::LinkCmp {
    match op {
        LinkCmp::Ge => g::LinkCmp::Ge,
        LinkCmp::Lt => g::LinkCmp::Lt,
        LinkCmp::Eq => g::LinkCmp::Eq,
        LinkCmp::Ne => g::LinkCmp::Ne,
    }
}

fn cmp_from(op: g::LinkCmp) -> LinkCmp {
    match op {
        g::LinkCmp::Ge => LinkCmp::Ge,
        g::LinkCmp::Lt => LinkCmp::Lt,
        g::LinkCmp::Eq => LinkCmp::Eq,
        g::LinkCmp::Ne => LinkCmp::Ne,
    }
}

fn opt_write(has: bool, var: u64, value: u64) -> Option<(u64, u64)> {
    has.then_some((var, value))
}

fn set_caw_request(mut c: g::link_caw_request::Builder<'_>, m: &LinkMessage) {
    let LinkMessage::CawRequest {
        request,
        var,
        op,
        value,
        dest,
        write,
    } = m
    else {
        unreachable!("called for Compare-And-Write requests only");
    };
    c.set_request(*request);
    c.set_var(*var);
    c.set_op(cmp_to(*op));
    c.set_value(*value);
    let mut l = c.reborrow().init_dest(dest.len() as u32);
    for (i, n) in dest.iter().enumerate() {
        l.set(i as u32, *n);
    }
    c.set_write(write.is_some());
    let (wv, wx) = write.unwrap_or((0, 0));
    c.set_write_var(wv);
    c.set_write_value(wx);
}

/// The packed header bytes of `m`.
pub fn encode_link_message(m: &LinkMessage) -> Vec<u8> {
    let mut msg = Builder::new_default();
    let mut root = msg.init_root::<g::link_message::Builder>();
    root.set_format_version(FORMAT_VERSION);
    match m {
        LinkMessage::Hello { node, nonce } => {
            let mut h = root.init_hello();
            h.set_node(*node);
            h.set_nonce(nonce);
        }
        LinkMessage::Auth {
            node,
            nodes,
            global_size,
            events,
            nonce,
            mac,
        } => {
            let mut a = root.init_auth();
            a.set_node(*node);
            a.set_nodes(*nodes);
            a.set_global_size(*global_size);
            a.set_events(*events);
            a.set_nonce(nonce);
            a.set_mac(mac);
        }
        LinkMessage::Accept { mac } => root.init_accept().set_mac(mac),
        LinkMessage::Xfer {
            request,
            offset,
            remote_event,
        } => {
            let mut x = root.init_xfer();
            x.set_request(*request);
            x.set_offset(*offset);
            x.set_signal(remote_event.is_some());
            x.set_remote_event(remote_event.unwrap_or(0));
        }
        LinkMessage::CawRequest { .. } => set_caw_request(root.init_caw_request(), m),
        LinkMessage::Compare {
            request,
            var,
            op,
            value,
            write,
        } => {
            let mut c = root.init_compare();
            c.set_request(*request);
            c.set_var(*var);
            c.set_op(cmp_to(*op));
            c.set_value(*value);
            c.set_write(write.is_some());
            let (wv, wx) = write.unwrap_or((0, 0));
            c.set_write_var(wv);
            c.set_write_value(wx);
        }
        LinkMessage::Store {
            request,
            var,
            value,
        } => {
            let mut s = root.init_store();
            s.set_request(*request);
            s.set_var(*var);
            s.set_value(*value);
        }
        LinkMessage::Reply { request, outcome } => {
            let mut r = root.init_reply();
            r.set_request(*request);
            match outcome {
                Ok(ok) => r.set_ok(*ok),
                Err(e) => r.set_error(e.as_str()),
            }
        }
        LinkMessage::Goodbye => root.set_goodbye(()),
    }
    to_bytes(&msg)
}

fn get_auth(a: g::link_auth::Reader<'_>) -> Result<LinkMessage, SchemaError> {
    Ok(LinkMessage::Auth {
        node: a.get_node(),
        nodes: a.get_nodes(),
        global_size: a.get_global_size(),
        events: a.get_events(),
        nonce: a.get_nonce()?.to_vec(),
        mac: a.get_mac()?.to_vec(),
    })
}

/// Reads back [`encode_link_message`]'s output; refuses malformed or newer messages.
pub fn decode_link_message(bytes: &[u8]) -> Result<LinkMessage, SchemaError> {
    use g::link_message::Which;
    let msg = reader(bytes)?;
    let root: g::link_message::Reader = msg.get_root()?;
    check_version(root.get_format_version())?;
    let cmp = |op: Result<g::LinkCmp, capnp::NotInSchema>| {
        op.map(cmp_from).map_err(unknown("comparison"))
    };
    Ok(match root.which().map_err(unknown("link message"))? {
        Which::Hello(h) => {
            let h = h?;
            LinkMessage::Hello {
                node: h.get_node(),
                nonce: h.get_nonce()?.to_vec(),
            }
        }
        Which::Auth(a) => get_auth(a?)?,
        Which::Accept(a) => LinkMessage::Accept {
            mac: a?.get_mac()?.to_vec(),
        },
        Which::Xfer(x) => {
            let x = x?;
            LinkMessage::Xfer {
                request: x.get_request(),
                offset: x.get_offset(),
                remote_event: x.get_signal().then_some(x.get_remote_event()),
            }
        }
        Which::CawRequest(c) => {
            let c = c?;
            LinkMessage::CawRequest {
                request: c.get_request(),
                var: c.get_var(),
                op: cmp(c.get_op())?,
                value: c.get_value(),
                dest: c.get_dest()?.iter().collect(),
                write: opt_write(c.get_write(), c.get_write_var(), c.get_write_value()),
            }
        }
        Which::Compare(c) => {
            let c = c?;
            LinkMessage::Compare {
                request: c.get_request(),
                var: c.get_var(),
                op: cmp(c.get_op())?,
                value: c.get_value(),
                write: opt_write(c.get_write(), c.get_write_var(), c.get_write_value()),
            }
        }
        Which::Store(s) => {
            let s = s?;
            LinkMessage::Store {
                request: s.get_request(),
                var: s.get_var(),
                value: s.get_value(),
            }
        }
        Which::Reply(r) => {
            let r = r?;
            let outcome = if r.has_error() {
                Err(r.get_error()?.to_string().map_err(|e| {
                    SchemaError::Capnp(capnp::Error::failed(format!("reply text: {e}")))
                })?)
            } else {
                Ok(r.get_ok())
            };
            LinkMessage::Reply {
                request: r.get_request(),
                outcome,
            }
        }
        Which::Goodbye(()) => LinkMessage::Goodbye,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<LinkMessage> {
        vec![
            LinkMessage::Hello {
                node: 2,
                nonce: vec![7; 32],
            },
            LinkMessage::Auth {
                node: 5,
                nodes: 64,
                global_size: 1 << 20,
                events: 16,
                nonce: vec![1; 32],
                mac: vec![9; 32],
            },
            LinkMessage::Accept { mac: vec![3; 32] },
            LinkMessage::Xfer {
                request: 1,
                offset: 4096,
                remote_event: Some(0),
            },
            LinkMessage::Xfer {
                request: u64::MAX,
                offset: 0,
                remote_event: None,
            },
            LinkMessage::CawRequest {
                request: 9,
                var: 16,
                op: LinkCmp::Ne,
                value: 3,
                dest: vec![0, 1, 63],
                write: Some((24, 4)),
            },
            LinkMessage::Compare {
                request: 10,
                var: 8,
                op: LinkCmp::Lt,
                value: 11,
                write: None,
            },
            LinkMessage::Store {
                request: 11,
                var: 64,
                value: u64::MAX,
            },
            LinkMessage::Reply {
                request: 12,
                outcome: Ok(true),
            },
            LinkMessage::Reply {
                request: 13,
                outcome: Ok(false),
            },
            LinkMessage::Reply {
                request: 14,
                outcome: Err("event 7 does not exist".into()),
            },
            LinkMessage::Goodbye,
        ]
    }

    #[test]
    fn every_message_round_trips() {
        for m in samples() {
            assert_eq!(decode_link_message(&encode_link_message(&m)).unwrap(), m);
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for m in samples() {
            let bytes = encode_link_message(&m);
            for cut in 0..bytes.len() {
                let _ = decode_link_message(&bytes[..cut]);
            }
        }
        assert!(decode_link_message(b"not a capnp message at all").is_err());
    }
}
