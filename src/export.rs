//! `strobe export FILE --format perfetto|csv|sqlite -o OUT`: a recording as something other
//! tools read. `perfetto` writes the Chrome trace JSON format (ui.perfetto.dev,
//! chrome://tracing and Perfetto's trace processor open it); `csv` writes the per-slice
//! metrics, one row a slice; `sqlite` a copy whose per-call tables are filled in. Everything is read through `strobe_recorder::Recording`.
//!
//! The trace, in Chrome trace terms (times in microseconds since the job started):
//! * one process per rank (`pid` = rank, named `rank R`): thread 0 holds the periods the
//!   rank was blocked (merged runs of slices blocked in the same call), threads 1.. hold
//!   the MPI calls as complete ("X") events, one per descriptor, from the start of the slice
//!   it was posted in to the end of the slice that completed it. Non-blocking calls overlap,
//!   and a Chrome trace thread must nest, so overlapping calls go to further threads
//!   ("lanes", assigned greedily);
//! * one process per node manager (`pid` = [`NODE_PID_BASE`] + node): each slice as an X
//!   event with its microphases as children (DEM, MSM, then P2P+BBM+RM), from the node's
//!   LTDEM / LTMSM / LTTS;
//! * flow arrows ("s" then "f") from the send to the receive of every matched message, at
//!   the start of the slice that matched them;
//! * counters ("C", `pid` [`JOB_PID`]) GETTS, NCOLL (DEM + MSM, all nodes) and NP2P (DEM +
//!   MSM, all nodes) per slice with metrics.
//!
//! The event counts are those of the recording: one call event per recorded descriptor,
//! one flow pair per match decision, one node slice per `node_slice` row, one counter
//! sample per slice with metrics (tests/tests/export.rs checks them).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use serde_json::{json, Value};
use strobe_recorder::Recording;
use strobe_runtime::descriptor::DescRef;
use strobe_runtime::sched::Decision;

/// `pid` of the first node manager's process in the trace (ranks use `pid` = rank).
pub const NODE_PID_BASE: u64 = 1_000_000;
/// `pid` of the job-wide counters.
pub const JOB_PID: u64 = 2_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Chrome trace JSON (ui.perfetto.dev, chrome://tracing).
    Perfetto,
    /// The per-slice metrics as CSV, one row a slice.
    Csv,
    /// A copy of the recording (a new SQLite file) whose `descriptor` and `decision`
    /// tables are filled in from the compact schedule log, for SQL of one's own.
    Sqlite,
}

#[derive(Args)]
pub struct ExportArgs {
    /// The recording.
    file: PathBuf,
    /// What to write.
    #[arg(long, value_enum, default_value = "perfetto")]
    format: Format,
    /// Where to write it (`-`: standard output).
    #[arg(short = 'o', long = "out", value_name = "OUT")]
    out: PathBuf,
}

pub fn export(a: &ExportArgs) -> Result<i32> {
    if a.format == Format::Sqlite {
        return export_sqlite(a);
    }
    let rec = match Recording::open(&a.file) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("strobe: {}: {e}", a.file.display());
            return Ok(crate::stats::EXIT_DAMAGED);
        }
    };
    let mut out: Box<dyn Write> = if a.out == Path::new("-") {
        Box::new(std::io::stdout().lock())
    } else {
        Box::new(std::io::BufWriter::new(
            std::fs::File::create(&a.out)
                .with_context(|| format!("creating {}", a.out.display()))?,
        ))
    };
    let written = match a.format {
        Format::Perfetto => {
            let trace = perfetto_trace(&rec)?;
            serde_json::to_writer(&mut out, &trace)
                .map_err(std::io::Error::from)
                .and_then(|()| writeln!(out))
        }
        Format::Csv => write_csv(&rec, &mut out),
        Format::Sqlite => unreachable!("--format sqlite returned above"),
    }
    .and_then(|()| out.flush());
    match written {
        // `strobe export ... -o - | head` is not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
        Err(e) => Err(e).with_context(|| format!("writing {}", a.out.display())),
        Ok(()) => Ok(0),
    }
}

/// `--format sqlite`: the recording with its per-call rows expanded, into a new file.
fn export_sqlite(a: &ExportArgs) -> Result<i32> {
    use strobe_recorder::RecordError;
    if a.out == Path::new("-") {
        eprintln!("strobe: --format sqlite writes a file: give -o FILE.db");
        return Ok(crate::stats::EXIT_DAMAGED);
    }
    match strobe_recorder::expand::export_expanded(&a.file, &a.out) {
        Ok((descriptors, decisions)) => {
            eprintln!(
                "strobe: wrote {} ({descriptors} descriptor rows, {decisions} decision rows)",
                a.out.display()
            );
            Ok(0)
        }
        Err(e @ RecordError::Exists(_)) => {
            eprintln!("strobe: {e}");
            Ok(crate::stats::EXIT_DAMAGED)
        }
        Err(e) => {
            eprintln!("strobe: {}: {e}", a.file.display());
            Ok(crate::stats::EXIT_DAMAGED)
        }
    }
}

/// One MPI call: a descriptor, when it was posted and when it completed.
struct Call {
    name: String,
    args: Value,
    /// Slice the descriptor was posted in (the slice before the one that handled it).
    posted: u64,
    /// Slice that completed it (`None`: never, e.g. the job died first).
    completed: Option<u64>,
}

/// Slice start times, for slices with and without a row.
struct Clock {
    starts: Vec<i64>,
    slice_ns: i64,
}

impl Clock {
    fn start_us(&self, slice: u64) -> f64 {
        let ns = self.starts.get(slice as usize).copied().unwrap_or_else(|| {
            self.starts.last().copied().unwrap_or(0)
                + self.slice_ns * (slice as i64 + 1 - self.starts.len() as i64)
        });
        ns as f64 / 1e3
    }
    fn end_us(&self, slice: u64) -> f64 {
        self.start_us(slice + 1)
    }
}

fn clock(rec: &Recording) -> Result<Clock> {
    let last = rec.last_slice();
    let slice_ns = rec.job().slice_ns.max(1) as i64;
    let rows: BTreeMap<u64, i64> = rec
        .slices(1..=last.max(1))?
        .into_iter()
        .map(|r| (r.slice, r.start_ns))
        .collect();
    // Slice 0 is the time before the first slice; a slice without a row (outside both
    // windows) is placed one slice length after the previous one.
    let mut starts = vec![0i64];
    for s in 1..=last + 1 {
        let prev = *starts.last().expect("slice 0");
        starts.push(rows.get(&s).copied().unwrap_or(prev + slice_ns).max(prev));
    }
    Ok(Clock { starts, slice_ns })
}

/// The Chrome trace of a recording (see the module comment for its layout).
pub fn perfetto_trace(rec: &Recording) -> Result<Value> {
    let job = rec.job();
    let clock = clock(rec)?;
    let last = rec.last_slice();
    let mut events: Vec<Value> = Vec::new();
    let mut calls: BTreeMap<DescRef, Call> = BTreeMap::new();
    let mut matches: Vec<(u64, DescRef, DescRef, u64)> = Vec::new();
    // Per rank: runs of blocked slices (first, last, call).
    let mut blocked: BTreeMap<u32, Vec<(u64, u64, String)>> = BTreeMap::new();
    let mut nodes = Vec::new();
    for s in 1..=last {
        let d = rec.slice_detail(s)?;
        for desc in &d.descriptors {
            calls.insert(
                DescRef {
                    rank: desc.rank,
                    seq: desc.seq as u64,
                },
                Call {
                    name: desc.kind.clone(),
                    args: json!({"seq": desc.seq, "peer": desc.peer, "tag": desc.tag,
                        "comm": desc.comm, "bytes": desc.bytes, "blocking": desc.blocking,
                        "handled_in_slice": s}),
                    posted: s - 1,
                    completed: None,
                },
            );
        }
        for dec in &d.decisions {
            match dec {
                Decision::Complete(c) => {
                    if let Some(call) = calls.get_mut(&c.desc) {
                        call.completed = Some(s);
                    }
                }
                Decision::Match(m) => matches.push((s, m.send, m.recv, m.bytes)),
                _ => {}
            }
        }
        for b in &d.blocked {
            let runs = blocked.entry(b.rank).or_default();
            match runs.last_mut() {
                Some((_, to, call)) if *to + 1 == s && *call == b.call => *to = s,
                _ => runs.push((s, s, b.call.clone())),
            }
        }
        nodes.extend(d.nodes);
    }
    for r in 0..job.ranks {
        events.push(meta(
            "process_name",
            r.into(),
            0,
            json!({"name": format!("rank {r}")}),
        ));
        events.push(meta(
            "process_sort_index",
            r.into(),
            0,
            json!({"sort_index": r}),
        ));
        events.push(meta("thread_name", r.into(), 0, json!({"name": "blocked"})));
    }
    for (rank, runs) in &blocked {
        for (from, to, call) in runs {
            events.push(span(
                &format!("blocked in {call}"),
                "blocked",
                (*rank).into(),
                0,
                clock.start_us(*from),
                clock.end_us(*to),
                json!({"first_slice": from, "last_slice": to}),
            ));
        }
    }
    let lanes = call_events(&calls, &clock, last, &mut events);
    flow_events(&matches, &calls, &lanes, &clock, last, &mut events);
    node_events(&nodes, job.nodes, &clock, &mut events);
    counter_events(rec, &nodes, &clock, &mut events)?;
    Ok(json!({
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "strobe_version": job.strobe_version,
            "command": job.command,
            "ranks": job.ranks,
            "nodes": job.nodes,
            "slices": last,
            "outcome": job.outcome,
        },
    }))
}

fn meta(name: &str, pid: u64, tid: u64, args: Value) -> Value {
    json!({"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args})
}

fn span(name: &str, cat: &str, pid: u64, tid: u64, ts: f64, end: f64, args: Value) -> Value {
    json!({"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": ts,
        "dur": (end - ts).max(0.0), "args": args})
}

/// The call events, each on the first lane of its rank free at its start; returns each
/// call's lane (thread id).
fn call_events(
    calls: &BTreeMap<DescRef, Call>,
    clock: &Clock,
    last: u64,
    events: &mut Vec<Value>,
) -> BTreeMap<DescRef, u64> {
    let mut lane_of = BTreeMap::new();
    // Per rank, the end time of each lane's last call.
    let mut lane_ends: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    let mut order: Vec<(&DescRef, &Call)> = calls.iter().collect();
    order.sort_by_key(|(id, c)| (id.rank, c.posted, id.seq));
    for (id, call) in order {
        let ts = clock.start_us(call.posted);
        let end = clock.end_us(call.completed.unwrap_or(last));
        let ends = lane_ends.entry(id.rank).or_default();
        let lane = match ends.iter().position(|&e| e <= ts) {
            Some(i) => i,
            None => {
                ends.push(0.0);
                let tid = ends.len() as u64;
                let name = if tid == 1 {
                    "calls".to_string()
                } else {
                    format!("calls {tid}")
                };
                events.push(meta(
                    "thread_name",
                    id.rank.into(),
                    tid,
                    json!({"name": name}),
                ));
                ends.len() - 1
            }
        };
        ends[lane] = end;
        let tid = lane as u64 + 1;
        lane_of.insert(*id, tid);
        let mut args = call.args.clone();
        args["completed_in_slice"] = json!(call.completed);
        events.push(span(&call.name, "mpi", id.rank.into(), tid, ts, end, args));
    }
    lane_of
}

/// A flow arrow per matched message, from the send's call to the receive's.
fn flow_events(
    matches: &[(u64, DescRef, DescRef, u64)],
    calls: &BTreeMap<DescRef, Call>,
    lanes: &BTreeMap<DescRef, u64>,
    clock: &Clock,
    last: u64,
    events: &mut Vec<Value>,
) {
    // Inside [posted start, completed end] of a call, so the arrow binds to it.
    let within = |id: &DescRef, ts: f64| -> f64 {
        match calls.get(id) {
            Some(c) => ts
                .max(clock.start_us(c.posted))
                .min(clock.end_us(c.completed.unwrap_or(last))),
            None => ts,
        }
    };
    for (n, (slice, send, recv, bytes)) in matches.iter().enumerate() {
        let ts = clock.start_us(*slice);
        let name = format!(
            "message {}#{} -> {}#{}",
            send.rank, send.seq, recv.rank, recv.seq
        );
        let args = json!({"slice": slice, "bytes": bytes});
        events.push(json!({"ph": "s", "name": name, "cat": "match", "id": n,
            "pid": send.rank, "tid": lanes.get(send).copied().unwrap_or(1),
            "ts": within(send, ts), "args": args}));
        events.push(
            json!({"ph": "f", "bp": "e", "name": name, "cat": "match", "id": n,
            "pid": recv.rank, "tid": lanes.get(recv).copied().unwrap_or(1),
            "ts": within(recv, ts), "args": args}),
        );
    }
}

/// Each node's slices with their microphases (LTDEM, LTMSM and LTTS are cumulative from
/// the strobe).
fn node_events(
    nodes: &[strobe_recorder::recording::NodeRow],
    n_nodes: u32,
    clock: &Clock,
    events: &mut Vec<Value>,
) {
    for n in 0..n_nodes {
        let pid = NODE_PID_BASE + u64::from(n);
        events.push(meta(
            "process_name",
            pid,
            0,
            json!({"name": format!("node manager {n}")}),
        ));
        events.push(meta(
            "process_sort_index",
            pid,
            0,
            json!({"sort_index": pid}),
        ));
        events.push(meta("thread_name", pid, 0, json!({"name": "microphases"})));
    }
    for row in nodes {
        let pid = NODE_PID_BASE + u64::from(row.node);
        let t0 = clock.start_us(row.slice);
        let us = |ns: i64| ns.max(0) as f64 / 1e3;
        let (dem, msm, ts) = (
            us(row.ltdem_ns),
            us(row.ltmsm_ns).max(us(row.ltdem_ns)),
            us(row.ltts_ns).max(us(row.ltmsm_ns)).max(us(row.ltdem_ns)),
        );
        let args = json!({"slice": row.slice, "np2pdem": row.np2pdem, "np2pmsm": row.np2pmsm,
            "ncolldem": row.ncolldem, "ncollmsm": row.ncollmsm, "bpts": row.bpts});
        events.push(span(
            &format!("slice {}", row.slice),
            "slice",
            pid,
            0,
            t0,
            t0 + ts,
            args,
        ));
        events.push(span("DEM", "microphase", pid, 0, t0, t0 + dem, json!({})));
        events.push(span(
            "MSM",
            "microphase",
            pid,
            0,
            t0 + dem,
            t0 + msm,
            json!({}),
        ));
        events.push(span(
            "P2P+BBM+RM",
            "microphase",
            pid,
            0,
            t0 + msm,
            t0 + ts,
            json!({}),
        ));
    }
}

/// GETTS, NCOLL and NP2P per slice with metrics, job-wide.
fn counter_events(
    rec: &Recording,
    nodes: &[strobe_recorder::recording::NodeRow],
    clock: &Clock,
    events: &mut Vec<Value>,
) -> Result<()> {
    events.push(meta("process_name", JOB_PID, 0, json!({"name": "job"})));
    let mut per_slice: BTreeMap<u64, (i64, i64)> = BTreeMap::new();
    for n in nodes {
        let e = per_slice.entry(n.slice).or_default();
        e.0 += n.ncolldem + n.ncollmsm;
        e.1 += n.np2pdem + n.np2pmsm;
    }
    for row in rec.slices(1..=rec.last_slice().max(1))? {
        let Some(getts) = row.getts_ns else { continue };
        let ts = clock.start_us(row.slice);
        let (ncoll, np2p) = per_slice.get(&row.slice).copied().unwrap_or_default();
        for (name, v) in [
            ("GETTS", json!({"us": getts as f64 / 1e3})),
            ("NCOLL", json!({"descriptors": ncoll})),
            ("NP2P", json!({"descriptors": np2p})),
        ] {
            events.push(
                json!({"ph": "C", "name": name, "pid": JOB_PID, "tid": 0, "ts": ts,
                "args": v}),
            );
        }
    }
    Ok(())
}

/// The per-slice metrics, one row a slice with a `slice` row, node counters summed.
fn write_csv(rec: &Recording, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "slice,reason,start_ns,getts_ns,gtdem_ns,gtmsm_ns,gtts_ns,usrsts,usrdem,usrmsm,\
         n_descriptors,n_matches,n_chunks,n_collectives,n_completions,n_blocked,\
         np2pdem,np2pmsm,ncolldem,ncollmsm,bpts,digest"
    )?;
    let last = rec.last_slice().max(1);
    let mut nodes: BTreeMap<u64, [i64; 5]> = BTreeMap::new();
    let io = |e: strobe_recorder::RecordError| std::io::Error::other(e.to_string());
    for n in rec.metrics(1..=last).map_err(io)? {
        let e = nodes.entry(n.slice).or_default();
        for (i, v) in [n.np2pdem, n.np2pmsm, n.ncolldem, n.ncollmsm, n.bpts]
            .into_iter()
            .enumerate()
        {
            e[i] += v;
        }
    }
    let opt = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
    for r in rec.slices(1..=last).map_err(io)? {
        let (a, b, c) = match r.usr {
            Some((a, b, c)) => (a.to_string(), b.to_string(), c.to_string()),
            None => Default::default(),
        };
        let n = nodes
            .get(&r.slice)
            .map(|n| n.map(|v| v.to_string()).join(","))
            .unwrap_or_else(|| ",,,,".into());
        writeln!(
            out,
            "{},{},{},{},{},{},{},{a},{b},{c},{},{},{},{},{},{},{n},{:016x}",
            r.slice,
            r.reason,
            r.start_ns,
            opt(r.getts_ns),
            opt(r.gtdem_ns),
            opt(r.gtmsm_ns),
            opt(r.gtts_ns),
            r.n_descriptors,
            r.n_matches,
            r.n_chunks,
            r.n_collectives,
            r.n_completions,
            r.n_blocked,
            r.digest as u64,
        )?;
    }
    Ok(())
}
