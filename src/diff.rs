//! `strobe diff A.db B.db`: where two recordings of the same program part ways.
//!
//! Slice numbers are timing (a live run's slices fire on a timer), so the two recordings
//! are aligned by what the program did, not by slice number: call by call, each rank's
//! descriptors in sequence order (`rank#seq`), with the decisions that name each one: the
//! match that paired it, the collective run it took part in, its completion (source, tag,
//! bytes, error). Chunks are left out: how a message is cut depends on what else moved in
//! the slice, which is timing. Timing-dependent outcomes are compared too, per rank and in
//! call order: the requests each `MPI_Test*`/`Waitany`/`Waitsome` reported, not how many
//! polls found nothing nor what `MPI_Wtime` returned (both differ in every pair of runs).
//!
//! Differences are ordered by the slice of A (then B) where they show, then rank and
//! sequence, so the first one reported is where the runs parted: typically a wildcard
//! receive (`MPI_ANY_SOURCE`) that matched another sender, after which everything else
//! differs. Decisions are printed with their one `Display` (core's `decision_text.rs`).
//!
//! Exit status: 0 no difference, 1 different, 2 cannot compare (a file that is not a
//! readable recording, another program or rank count, or a schedule log that does not
//! cover the slices).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;
use strobe_recorder::recording::DescriptorRow;
use strobe_recorder::Recording;
use strobe_runtime::descriptor::{DescRef, ANY_SOURCE};
use strobe_runtime::outcome::{Outcome, OutcomeCursor};
use strobe_runtime::sched::Decision;

pub const EXIT_SAME: i32 = 0;
pub const EXIT_DIFFERENT: i32 = 1;
pub const EXIT_CANNOT_COMPARE: i32 = 2;

#[derive(Args)]
pub struct DiffArgs {
    /// The first recording.
    a: PathBuf,
    /// The second recording.
    b: PathBuf,
    /// List every difference, not only the first.
    #[arg(long)]
    all: bool,
}

/// One recording, as the program's calls and what was decided about each.
pub struct Calls {
    /// Every descriptor: the slice that handled it and the descriptor.
    pub descs: BTreeMap<DescRef, (u64, DescriptorRow)>,
    /// The decisions naming each descriptor (chunks excepted), with their slices.
    pub decided: BTreeMap<DescRef, Vec<(u64, Decision)>>,
    /// Per rank, the requests each timing-dependent test or wait reported, in order.
    pub outcomes: Vec<Vec<String>>,
}

/// Why two recordings cannot be compared.
#[derive(Debug)]
pub struct CannotCompare(pub String);

impl Calls {
    pub fn read(rec: &Recording) -> Result<Calls, CannotCompare> {
        let io = |e: strobe_recorder::RecordError| {
            CannotCompare(format!("{}: {e}", rec.path().display()))
        };
        let mut descs = BTreeMap::new();
        let mut decided: BTreeMap<DescRef, Vec<(u64, Decision)>> = BTreeMap::new();
        for s in 1..=rec.last_slice() {
            let (Some(ds), Some(decs)) = (
                rec.descriptors(s).map_err(io)?,
                rec.decisions(s).map_err(io)?,
            ) else {
                return Err(CannotCompare(format!(
                    "{}: the schedule log does not cover slice {s} (recorded with \
                     --schedule-log off or a window?)",
                    rec.path().display()
                )));
            };
            for d in ds {
                let id = DescRef {
                    rank: d.rank,
                    seq: d.seq as u64,
                };
                descs.insert(id, (s, d));
            }
            for dec in decs {
                for id in named(&dec) {
                    decided.entry(id).or_default().push((s, dec.clone()));
                }
            }
        }
        let log = rec.replay_log().map_err(io)?;
        let outcomes = log
            .ranks
            .iter()
            .map(|r| {
                let mut cur = OutcomeCursor::new(r.outcomes.clone());
                let mut v = Vec::new();
                while let Ok(Some(o)) = cur.next_outcome() {
                    if let Outcome::Indices(_) = o {
                        v.push(o.describe());
                    }
                }
                v
            })
            .collect();
        Ok(Calls {
            descs,
            decided,
            outcomes,
        })
    }
}

/// The descriptors a decision is about (none for chunks and new communicators).
fn named(d: &Decision) -> Vec<DescRef> {
    match d {
        Decision::Match(m) => vec![m.send, m.recv],
        Decision::Collective(c) => c.parts.clone(),
        Decision::Complete(c) => vec![c.desc],
        Decision::Chunk(_) | Decision::NewComm(_) => Vec::new(),
    }
}

/// One difference between the recordings.
#[derive(Debug)]
pub struct Difference {
    /// Where it shows in A and in B (`None`: that side has no such call).
    pub slice_a: Option<u64>,
    pub slice_b: Option<u64>,
    /// The call (`None`: an outcome of a test or wait).
    pub call: Option<DescRef>,
    pub rank: u32,
    /// What the difference is about, one line.
    pub what: String,
    pub a: Vec<String>,
    pub b: Vec<String>,
    /// The ranks whose calls the difference involves on each side (the call's rank
    /// first, then the other parties of the first differing decision): their source lines
    /// are printed where the recording knows them.
    pub ranks_a: Vec<u32>,
    pub ranks_b: Vec<u32>,
}

impl Difference {
    fn order(&self) -> (u64, u64, u32, u64) {
        (
            self.slice_a.unwrap_or(u64::MAX),
            self.slice_b.unwrap_or(u64::MAX),
            self.rank,
            self.call.map_or(u64::MAX, |c| c.seq),
        )
    }
}

/// A descriptor in words: `MPI_Recv source=ANY tag=7 comm=0 8 bytes`.
fn describe(d: &DescriptorRow) -> String {
    let peer = if d.peer == i64::from(ANY_SOURCE) {
        "ANY".to_string()
    } else {
        d.peer.to_string()
    };
    format!(
        "{} peer={peer} tag={} comm={} {} bytes{}",
        d.kind,
        d.tag,
        d.comm,
        d.bytes,
        if d.blocking { "" } else { " (non-blocking)" }
    )
}

fn is_wildcard(d: &DescriptorRow) -> bool {
    d.peer == i64::from(ANY_SOURCE) && (d.kind.contains("recv") || d.kind.contains("Recv"))
}

/// Every difference, first first.
pub fn differences(a: &Calls, b: &Calls) -> Vec<Difference> {
    let mut out = Vec::new();
    let ids: BTreeSet<DescRef> = a.descs.keys().chain(b.descs.keys()).copied().collect();
    let lines = |c: &Calls, id: &DescRef| -> Vec<(u64, String)> {
        c.decided
            .get(id)
            .map(|v| v.iter().map(|(s, d)| (*s, d.to_string())).collect())
            .unwrap_or_default()
    };
    for id in ids {
        let (da, db) = (a.descs.get(&id), b.descs.get(&id));
        let (ta, tb) = (da.map(|d| describe(&d.1)), db.map(|d| describe(&d.1)));
        if ta != tb {
            out.push(Difference {
                slice_a: da.map(|d| d.0),
                slice_b: db.map(|d| d.0),
                call: Some(id),
                rank: id.rank,
                what: match (da, db) {
                    (Some(_), None) => format!("call {}#{} made only in A", id.rank, id.seq),
                    (None, Some(_)) => format!("call {}#{} made only in B", id.rank, id.seq),
                    _ => format!("call {}#{} differs", id.rank, id.seq),
                },
                a: ta.into_iter().collect(),
                b: tb.into_iter().collect(),
                ranks_a: vec![id.rank],
                ranks_b: vec![id.rank],
            });
            continue;
        }
        let (la, lb) = (lines(a, &id), lines(b, &id));
        let first = la
            .iter()
            .zip(&lb)
            .position(|(x, y)| x.1 != y.1)
            .or_else(|| (la.len() != lb.len()).then(|| la.len().min(lb.len())));
        let Some(i) = first else { continue };
        let d = &da.expect("same text, both present").1;
        let wildcard = if is_wildcard(d) {
            " (a wildcard receive: MPI_ANY_SOURCE)"
        } else {
            ""
        };
        out.push(Difference {
            slice_a: la.get(i).map(|x| x.0),
            slice_b: lb.get(i).map(|x| x.0),
            call: Some(id),
            rank: id.rank,
            what: format!("{}#{} {}{wildcard}", id.rank, id.seq, describe(d)),
            a: la[i..].iter().map(|x| x.1.clone()).collect(),
            b: lb[i..].iter().map(|x| x.1.clone()).collect(),
            ranks_a: involved(a, &id, i),
            ranks_b: involved(b, &id, i),
        });
    }
    for (rank, (oa, ob)) in a.outcomes.iter().zip(&b.outcomes).enumerate() {
        let first = oa
            .iter()
            .zip(ob)
            .position(|(x, y)| x != y)
            .or_else(|| (oa.len() != ob.len()).then(|| oa.len().min(ob.len())));
        if let Some(i) = first {
            out.push(Difference {
                slice_a: None,
                slice_b: None,
                call: None,
                rank: rank as u32,
                what: format!(
                    "rank {rank}'s timing-dependent test/wait #{} (counting only those \
                     that reported requests)",
                    i + 1
                ),
                a: oa.get(i).cloned().into_iter().collect(),
                b: ob.get(i).cloned().into_iter().collect(),
                ranks_a: Vec::new(),
                ranks_b: Vec::new(),
            });
        }
    }
    out.sort_by_key(Difference::order);
    out
}

/// `id`'s rank, then the other ranks named by its `i`th decision in `c`.
fn involved(c: &Calls, id: &DescRef, i: usize) -> Vec<u32> {
    let mut ranks = vec![id.rank];
    if let Some((_, dec)) = c.decided.get(id).and_then(|v| v.get(i)) {
        for r in named(dec).iter().map(|d| d.rank) {
            if !ranks.contains(&r) {
                ranks.push(r);
            }
        }
    }
    ranks
}

/// Refuse pairs that are not two runs of one program on the same number of ranks.
fn comparable(a: &Recording, b: &Recording) -> Result<Vec<String>, CannotCompare> {
    let (ja, jb) = (a.job(), b.job());
    if ja.ranks != jb.ranks {
        return Err(CannotCompare(format!(
            "different numbers of ranks ({} and {})",
            ja.ranks, jb.ranks
        )));
    }
    if ja.program_sha256.is_some() && ja.program_sha256 != jb.program_sha256 {
        return Err(CannotCompare(format!(
            "different programs ({} and {}: their SHA-256 differ)",
            ja.program.display(),
            jb.program.display()
        )));
    }
    let mut notes = Vec::new();
    let args = |c: &[String]| c.get(1..).unwrap_or_default().to_vec();
    if args(&ja.command) != args(&jb.command) {
        notes.push(format!(
            "note: the arguments differ: {:?} and {:?}",
            args(&ja.command),
            args(&jb.command)
        ));
    }
    Ok(notes)
}

fn open(p: &Path) -> Result<Recording, CannotCompare> {
    Recording::open(p).map_err(|e| CannotCompare(format!("{}: {e}", p.display())))
}

pub fn diff(args: &DiffArgs) -> Result<i32> {
    let compared = (|| {
        let (ra, rb) = (open(&args.a)?, open(&args.b)?);
        let notes = comparable(&ra, &rb)?;
        let (ca, cb) = (Calls::read(&ra)?, Calls::read(&rb)?);
        Ok::<_, CannotCompare>((notes, ra, rb, differences(&ca, &cb)))
    })();
    let (notes, ra, rb, diffs) = match compared {
        Ok(v) => v,
        Err(CannotCompare(why)) => {
            eprintln!("strobe diff: cannot compare: {why}");
            return Ok(EXIT_CANNOT_COMPARE);
        }
    };
    let mut out = String::new();
    let code = report(&mut out, args, &notes, &ra, &rb, &diffs);
    // A closed pipe (`strobe diff ... | head`) is not an error.
    let _ = std::io::stdout().write_all(out.as_bytes());
    Ok(code)
}

/// For `strobe tui A.db --diff B.db`: the first difference as (its slice in A, the
/// report's text: the difference and both sides' calls), `None` when the recordings do not
/// differ, `Err` (why) when they cannot be compared.
pub fn first_difference(a: &Path, b: &Path) -> Result<Option<(Option<u64>, String)>, String> {
    let (ra, rb) = (open(a), open(b));
    let (ra, rb) = (ra.map_err(|e| e.0)?, rb.map_err(|e| e.0)?);
    let notes = comparable(&ra, &rb).map_err(|e| e.0)?;
    let (ca, cb) = (
        Calls::read(&ra).map_err(|e| e.0)?,
        Calls::read(&rb).map_err(|e| e.0)?,
    );
    let diffs = differences(&ca, &cb);
    let Some(first) = diffs.first() else {
        return Ok(None);
    };
    let args = DiffArgs {
        a: a.to_path_buf(),
        b: b.to_path_buf(),
        all: false,
    };
    let mut text = String::new();
    report(&mut text, &args, &notes, &ra, &rb, &diffs);
    Ok(Some((first.slice_a, text)))
}

fn report(
    out: &mut String,
    args: &DiffArgs,
    notes: &[String],
    ra: &Recording,
    rb: &Recording,
    diffs: &[Difference],
) -> i32 {
    for n in notes {
        let _ = writeln!(out, "{n}");
    }
    let (na, nb) = (args.a.display(), args.b.display());
    if diffs.is_empty() {
        let _ = writeln!(
            out,
            "no difference: the same calls, matches, collectives and completions on every \
             rank ({na}: {} slices, {nb}: {} slices)",
            ra.last_slice(),
            rb.last_slice()
        );
        return EXIT_SAME;
    }
    let shown = if args.all { diffs.len() } else { 1 };
    for (i, d) in diffs.iter().take(shown).enumerate() {
        let title = if i == 0 {
            "first difference"
        } else {
            "difference"
        };
        let _ = writeln!(out, "{title}: rank {}, {}", d.rank, d.what);
        print_side(out, "A", &na.to_string(), d.slice_a, &d.a);
        print_sites(out, "A", ra, d.slice_a, d.rank, &d.ranks_a);
        print_side(out, "B", &nb.to_string(), d.slice_b, &d.b);
        print_sites(out, "B", rb, d.slice_b, d.rank, &d.ranks_b);
    }
    if !args.all && diffs.len() > 1 {
        let _ = writeln!(
            out,
            "({} more difference(s) after it; --all lists them)",
            diffs.len() - 1
        );
    }
    print_ends(out, ra, rb);
    EXIT_DIFFERENT
}

fn print_side(out: &mut String, side: &str, file: &str, slice: Option<u64>, lines: &[String]) {
    let at = slice.map_or("-".to_string(), |s| format!("slice {s}"));
    match lines.first() {
        None => {
            let _ = writeln!(out, "  {side} ({file}) {at}: nothing");
        }
        Some(first) => {
            let _ = writeln!(out, "  {side} ({file}) {at}: {first}");
            for l in &lines[1..] {
                let _ = writeln!(
                    out,
                    "  {side}{:width$}  {l}",
                    "",
                    width = file.len() + at.len() + 3
                );
            }
        }
    }
}

/// Where the involved ranks made their calls on one side: each rank blocked at the start
/// of the slice with a known call site (`blocked_site`; the program needs `-g` for file and
/// line). Nothing when none is known (a non-blocking call, a recording without sites).
/// Another rank than the difference's own is named only while blocked in a send or in the
/// same call as that rank: a sender whose send completed without blocking (an inline or
/// eager send) is blocked in a later call, whose line would mislead.
fn print_sites(
    out: &mut String,
    side: &str,
    rec: &Recording,
    slice: Option<u64>,
    own: u32,
    ranks: &[u32],
) {
    let Some(slice) = slice else { return };
    let calls = rec.blocked_at(slice).unwrap_or_default();
    let call_of = |r: u32| calls.iter().find(|(x, _)| *x == r).map(|(_, c)| c.as_str());
    let own_call = call_of(own);
    let relevant = |r: u32| {
        r == own
            || call_of(r)
                .is_some_and(|c| c.to_ascii_lowercase().contains("send") || Some(c) == own_call)
    };
    let sites: Vec<String> = ranks
        .iter()
        .filter(|&&r| relevant(r))
        .filter_map(|&r| match rec.blocked_site(r, slice) {
            Ok(Some(site)) => Some(format!("rank {r} at {}", site.short())),
            _ => None,
        })
        .collect();
    if !sites.is_empty() {
        let _ = writeln!(out, "  {side} source: {}", sites.join(", "));
    }
}

fn print_ends(out: &mut String, a: &Recording, b: &Recording) {
    let end = |r: &Recording| {
        let j = r.job();
        format!(
            "{} (exit {})",
            j.outcome.as_deref().unwrap_or("unfinished"),
            j.exit_status.map_or("?".into(), |c| c.to_string())
        )
    };
    let _ = writeln!(out, "  outcome: A {}, B {}", end(a), end(b));
}
