//! Control-connection messages (schema `ControlMessage`): what a node daemon and the
//! Machine Manager say to each other, in plain Rust types. The frame layout (length
//! prefixes, raw payload after the header) and the handshake belong to the runtime
//! (`runtime/src/daemon/control.rs`); this module only encodes and decodes the header.

use capnp::message::Builder;

use crate::convert::{check_version, reader, to_bytes, unknown};
use crate::generated::strobe_capnp as g;
use crate::{SchemaError, FORMAT_VERSION};

/// Everything a daemon needs to run its share of a job.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobSpec {
    pub program: Vec<u8>,
    pub program_sha256: Vec<u8>,
    pub args: Vec<Vec<u8>>,
    pub env: Vec<(Vec<u8>, Vec<u8>)>,
    pub cwd: Vec<u8>,
    pub ranks: u32,
    pub nodes: u32,
    pub placement: Vec<u32>,
    pub slice_ns: u64,
    pub adaptive: bool,
    pub deadlock_slices: u32,
    pub chunk_budget: u64,
    pub direct_copy_min: u64,
    pub eager_max: u64,
    /// The largest standard send carried inline in its descriptor (0: none; a replay of a
    /// recording made before scheduler version 3).
    pub inline_max: u64,
    /// Ranks complete `MPI_PROC_NULL` sends and receives themselves (scheduler version 4;
    /// false in a replay of an older recording).
    pub local_null: bool,
    pub tag_output: bool,
    /// 0: none.
    pub timeout_ms: u64,
    pub mmds_resolution: u32,
    pub ship_slices: bool,
    /// Ranks whose payloads are recorded (`--capture-payloads`), ascending.
    pub captures: Vec<u32>,
    /// A replay: a [`ControlMessage::ReplayPackage`] follows the spec.
    pub replay: bool,
}

/// How a daemon's share of a replay ended, as its slice source saw it (schema
/// `ControlReplayEnd`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplayEnd {
    /// The source reached the end of the recording at this slice.
    pub end_of_recording: Option<u64>,
    /// A rank left its recorded path (node 0's gate): slice, rank, recorded, replayed.
    pub divergence: Option<(u64, Option<u32>, String, String)>,
}

/// How a rank ended (schema `ControlDeath`); `code` is the signal, the status or the
/// `MPI_Abort` code where one applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Death {
    Clean,
    Signal,
    ExitCode,
    NoFinalize,
    NoInit,
    Abort,
    NotStarted,
}

/// How a node's share of the job ended (schema `ControlOutcome`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeOutcome {
    Success,
    Failed,
    Deadlock,
    Stopped,
    SourceStopped,
}

/// One header on a control connection (schema `ControlMessage`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControlMessage {
    JobSpec(Box<JobSpec>),
    FabricAddr(String),
    FabricPeers(Vec<String>),
    /// The frame's payload holds the bytes.
    RankOutput {
        rank: u32,
        stderr: bool,
    },
    RankExit {
        rank: u32,
        pid: u32,
        status: i32,
        how: Death,
        code: i32,
        slice: u64,
    },
    /// The frame's payload is opaque (the wire sink's encoding).
    SinkFrame,
    Heartbeat(u64),
    Stop(String),
    NodeReport {
        outcome: NodeOutcome,
        slice: u64,
        exit_code: i32,
        message: String,
    },
    Goodbye,
    DaemonHello {
        node: u32,
        host: String,
        pid: u32,
    },
    /// Bytes for a rank's stdin (the frame's payload); an empty payload is its end.
    RankInput(u32),
    /// A replay's package for this daemon (the frame's payload, replayer `remote.rs`).
    ReplayPackage,
    /// Daemon -> MM, before its node report in a replay.
    ReplayEnd(Box<ReplayEnd>),
}

fn death_to(d: Death) -> g::ControlDeath {
    match d {
        Death::Clean => g::ControlDeath::Clean,
        Death::Signal => g::ControlDeath::Signal,
        Death::ExitCode => g::ControlDeath::ExitCode,
        Death::NoFinalize => g::ControlDeath::NoFinalize,
        Death::NoInit => g::ControlDeath::NoInit,
        Death::Abort => g::ControlDeath::Abort,
        Death::NotStarted => g::ControlDeath::NotStarted,
    }
}

fn death_from(d: g::ControlDeath) -> Death {
    match d {
        g::ControlDeath::Clean => Death::Clean,
        g::ControlDeath::Signal => Death::Signal,
        g::ControlDeath::ExitCode => Death::ExitCode,
        g::ControlDeath::NoFinalize => Death::NoFinalize,
        g::ControlDeath::NoInit => Death::NoInit,
        g::ControlDeath::Abort => Death::Abort,
        g::ControlDeath::NotStarted => Death::NotStarted,
    }
}

fn outcome_to(o: NodeOutcome) -> g::ControlOutcome {
    match o {
        NodeOutcome::Success => g::ControlOutcome::Success,
        NodeOutcome::Failed => g::ControlOutcome::Failed,
        NodeOutcome::Deadlock => g::ControlOutcome::Deadlock,
        NodeOutcome::Stopped => g::ControlOutcome::Stopped,
        NodeOutcome::SourceStopped => g::ControlOutcome::SourceStopped,
    }
}

fn outcome_from(o: g::ControlOutcome) -> NodeOutcome {
    match o {
        g::ControlOutcome::Success => NodeOutcome::Success,
        g::ControlOutcome::Failed => NodeOutcome::Failed,
        g::ControlOutcome::Deadlock => NodeOutcome::Deadlock,
        g::ControlOutcome::Stopped => NodeOutcome::Stopped,
        g::ControlOutcome::SourceStopped => NodeOutcome::SourceStopped,
    }
}

fn set_spec(mut j: g::control_job_spec::Builder<'_>, s: &JobSpec) {
    j.set_program(&s.program);
    j.set_program_sha256(&s.program_sha256);
    let mut args = j.reborrow().init_args(s.args.len() as u32);
    for (i, a) in s.args.iter().enumerate() {
        args.set(i as u32, a);
    }
    let mut env = j.reborrow().init_env(s.env.len() as u32);
    for (i, (k, v)) in s.env.iter().enumerate() {
        let mut e = env.reborrow().get(i as u32);
        e.set_key(k);
        e.set_value(v);
    }
    j.set_cwd(&s.cwd);
    j.set_ranks(s.ranks);
    j.set_nodes(s.nodes);
    let mut p = j.reborrow().init_placement(s.placement.len() as u32);
    for (i, n) in s.placement.iter().enumerate() {
        p.set(i as u32, *n);
    }
    j.set_slice_ns(s.slice_ns);
    j.set_adaptive(s.adaptive);
    j.set_deadlock_slices(s.deadlock_slices);
    j.set_chunk_budget(s.chunk_budget);
    j.set_direct_copy_min(s.direct_copy_min);
    j.set_eager_max(s.eager_max);
    j.set_inline_max(s.inline_max);
    j.set_local_null(s.local_null);
    j.set_tag_output(s.tag_output);
    j.set_timeout_ms(s.timeout_ms);
    j.set_mmds_resolution(s.mmds_resolution);
    j.set_ship_slices(s.ship_slices);
    let mut c = j.reborrow().init_captures(s.captures.len() as u32);
    for (i, r) in s.captures.iter().enumerate() {
        c.set(i as u32, *r);
    }
    j.set_replay(s.replay);
}

fn get_spec(j: g::control_job_spec::Reader<'_>) -> Result<JobSpec, SchemaError> {
    let mut env = Vec::new();
    for e in j.get_env()? {
        env.push((e.get_key()?.to_vec(), e.get_value()?.to_vec()));
    }
    let mut args = Vec::new();
    for a in j.get_args()? {
        args.push(a?.to_vec());
    }
    Ok(JobSpec {
        program: j.get_program()?.to_vec(),
        program_sha256: j.get_program_sha256()?.to_vec(),
        args,
        env,
        cwd: j.get_cwd()?.to_vec(),
        ranks: j.get_ranks(),
        nodes: j.get_nodes(),
        placement: j.get_placement()?.iter().collect(),
        slice_ns: j.get_slice_ns(),
        adaptive: j.get_adaptive(),
        deadlock_slices: j.get_deadlock_slices(),
        chunk_budget: j.get_chunk_budget(),
        direct_copy_min: j.get_direct_copy_min(),
        eager_max: j.get_eager_max(),
        inline_max: j.get_inline_max(),
        local_null: j.get_local_null(),
        tag_output: j.get_tag_output(),
        timeout_ms: j.get_timeout_ms(),
        mmds_resolution: j.get_mmds_resolution(),
        ship_slices: j.get_ship_slices(),
        captures: j.get_captures()?.iter().collect(),
        replay: j.get_replay(),
    })
}

/// The packed header bytes of `m`.
pub fn encode_control_message(m: &ControlMessage) -> Vec<u8> {
    let mut msg = Builder::new_default();
    let mut root = msg.init_root::<g::control_message::Builder>();
    root.set_format_version(FORMAT_VERSION);
    match m {
        ControlMessage::JobSpec(s) => set_spec(root.init_job_spec(), s),
        ControlMessage::FabricAddr(a) => root.set_fabric_addr(a.as_str()),
        ControlMessage::FabricPeers(peers) => {
            let mut l = root.init_fabric_peers(peers.len() as u32);
            for (i, p) in peers.iter().enumerate() {
                l.set(i as u32, p.as_str());
            }
        }
        ControlMessage::RankOutput { rank, stderr } => {
            let mut o = root.init_rank_output();
            o.set_rank(*rank);
            o.set_stderr(*stderr);
        }
        ControlMessage::RankExit {
            rank,
            pid,
            status,
            how,
            code,
            slice,
        } => {
            let mut x = root.init_rank_exit();
            x.set_rank(*rank);
            x.set_pid(*pid);
            x.set_status(*status);
            x.set_how(death_to(*how));
            x.set_code(*code);
            x.set_slice(*slice);
        }
        ControlMessage::SinkFrame => root.set_sink_frame(()),
        ControlMessage::Heartbeat(slice) => root.set_heartbeat(*slice),
        ControlMessage::Stop(why) => root.set_stop(why.as_str()),
        ControlMessage::NodeReport {
            outcome,
            slice,
            exit_code,
            message,
        } => {
            let mut r = root.init_node_report();
            r.set_outcome(outcome_to(*outcome));
            r.set_slice(*slice);
            r.set_exit_code(*exit_code);
            r.set_message(message.as_str());
        }
        ControlMessage::Goodbye => root.set_goodbye(()),
        ControlMessage::DaemonHello { node, host, pid } => {
            let mut h = root.init_daemon_hello();
            h.set_node(*node);
            h.set_host(host.as_str());
            h.set_pid(*pid);
        }
        ControlMessage::RankInput(rank) => root.set_rank_input(*rank),
        ControlMessage::ReplayPackage => root.set_replay_package(()),
        ControlMessage::ReplayEnd(e) => {
            let mut r = root.init_replay_end();
            r.set_end_of_recording(e.end_of_recording.unwrap_or(0));
            if let Some((slice, rank, recorded, replayed)) = &e.divergence {
                r.set_divergence_slice(*slice);
                r.set_divergence_rank(rank.map_or(-1, i64::from));
                r.set_recorded(recorded.as_str());
                r.set_replayed(replayed.as_str());
            } else {
                r.set_divergence_rank(-1);
            }
        }
    }
    to_bytes(&msg)
}

fn text(t: capnp::Result<capnp::text::Reader<'_>>) -> Result<String, SchemaError> {
    t?.to_string()
        .map_err(|e| SchemaError::Capnp(capnp::Error::failed(format!("control text: {e}"))))
}

/// Reads back [`encode_control_message`]'s output; refuses malformed or newer messages.
pub fn decode_control_message(bytes: &[u8]) -> Result<ControlMessage, SchemaError> {
    use g::control_message::Which;
    let msg = reader(bytes)?;
    let root: g::control_message::Reader = msg.get_root()?;
    check_version(root.get_format_version())?;
    Ok(match root.which().map_err(unknown("control message"))? {
        Which::JobSpec(j) => ControlMessage::JobSpec(Box::new(get_spec(j?)?)),
        Which::FabricAddr(a) => ControlMessage::FabricAddr(text(a)?),
        Which::FabricPeers(l) => {
            let mut peers = Vec::new();
            for p in l? {
                peers.push(text(p)?);
            }
            ControlMessage::FabricPeers(peers)
        }
        Which::RankOutput(o) => {
            let o = o?;
            ControlMessage::RankOutput {
                rank: o.get_rank(),
                stderr: o.get_stderr(),
            }
        }
        Which::RankExit(x) => {
            let x = x?;
            ControlMessage::RankExit {
                rank: x.get_rank(),
                pid: x.get_pid(),
                status: x.get_status(),
                how: death_from(x.get_how().map_err(unknown("rank death"))?),
                code: x.get_code(),
                slice: x.get_slice(),
            }
        }
        Which::SinkFrame(()) => ControlMessage::SinkFrame,
        Which::Heartbeat(s) => ControlMessage::Heartbeat(s),
        Which::Stop(why) => ControlMessage::Stop(text(why)?),
        Which::NodeReport(r) => {
            let r = r?;
            ControlMessage::NodeReport {
                outcome: outcome_from(r.get_outcome().map_err(unknown("node outcome"))?),
                slice: r.get_slice(),
                exit_code: r.get_exit_code(),
                message: text(r.get_message())?,
            }
        }
        Which::Goodbye(()) => ControlMessage::Goodbye,
        Which::DaemonHello(h) => {
            let h = h?;
            ControlMessage::DaemonHello {
                node: h.get_node(),
                host: text(h.get_host())?,
                pid: h.get_pid(),
            }
        }
        Which::RankInput(rank) => ControlMessage::RankInput(rank),
        Which::ReplayPackage(()) => ControlMessage::ReplayPackage,
        Which::ReplayEnd(r) => {
            let r = r?;
            let slice = r.get_divergence_slice();
            let divergence = if slice == 0 {
                None
            } else {
                Some((
                    slice,
                    u32::try_from(r.get_divergence_rank()).ok(),
                    text(r.get_recorded())?,
                    text(r.get_replayed())?,
                ))
            };
            ControlMessage::ReplayEnd(Box::new(ReplayEnd {
                end_of_recording: Some(r.get_end_of_recording()).filter(|&s| s > 0),
                divergence,
            }))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<ControlMessage> {
        vec![
            ControlMessage::JobSpec(Box::new(JobSpec {
                program: b"/bin/true".to_vec(),
                program_sha256: vec![7; 32],
                args: vec![b"-x".to_vec(), vec![0xff, 0]],
                env: vec![(b"A".to_vec(), b"1".to_vec())],
                cwd: b"/tmp".to_vec(),
                ranks: 6,
                nodes: 3,
                placement: vec![0, 0, 1, 1, 2, 2],
                slice_ns: 1_000_000,
                adaptive: true,
                deadlock_slices: 10,
                chunk_budget: 1 << 20,
                direct_copy_min: 2 << 20,
                eager_max: 16384,
                inline_max: 56,
                local_null: true,
                tag_output: true,
                timeout_ms: 5000,
                mmds_resolution: 4,
                ship_slices: true,
                captures: vec![0, 4],
                replay: true,
            })),
            ControlMessage::JobSpec(Box::default()),
            ControlMessage::FabricAddr("10.0.0.1:4000".into()),
            ControlMessage::FabricPeers(vec!["a:1".into(), "b:2".into()]),
            ControlMessage::RankOutput {
                rank: 3,
                stderr: true,
            },
            ControlMessage::RankExit {
                rank: 1,
                pid: 99,
                status: 9,
                how: Death::Signal,
                code: 9,
                slice: 12,
            },
            ControlMessage::SinkFrame,
            ControlMessage::Heartbeat(u64::MAX),
            ControlMessage::Stop("rank 2 failed".into()),
            ControlMessage::NodeReport {
                outcome: NodeOutcome::Deadlock,
                slice: 5,
                exit_code: 3,
                message: "deadlock".into(),
            },
            ControlMessage::Goodbye,
            ControlMessage::DaemonHello {
                node: 2,
                host: "h3".into(),
                pid: 1,
            },
            ControlMessage::RankInput(0),
            ControlMessage::ReplayPackage,
            ControlMessage::ReplayEnd(Box::default()),
            ControlMessage::ReplayEnd(Box::new(ReplayEnd {
                end_of_recording: Some(9),
                divergence: Some((4, Some(1), "call a".into(), "call b".into())),
            })),
        ]
    }

    #[test]
    fn every_message_round_trips() {
        for m in samples() {
            assert_eq!(
                decode_control_message(&encode_control_message(&m)).unwrap(),
                m
            );
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for m in samples() {
            let bytes = encode_control_message(&m);
            for cut in 0..bytes.len() {
                let _ = decode_control_message(&bytes[..cut]);
            }
        }
        assert!(decode_control_message(b"not a capnp message at all").is_err());
    }
}
