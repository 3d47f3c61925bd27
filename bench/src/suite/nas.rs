//! The NAS IS kernel (issue 14): an integer bucket sort with the communication pattern of
//! NPB IS (`MPI_Allreduce` of bucket counts, `MPI_Alltoall` of send counts, `MPI_Alltoallv`
//! of the keys, every iteration), class A at 2 and 4 ranks, strobe against MPICH. The
//! papers report a 10.14% slowdown for IS; the target is at most 10%.

use std::fmt::Write as _;

use anyhow::Result;

use super::report::{cell, ratio_value, Table, Target};
use super::runner::value;
use super::sections::{args, note_run, summ, versus_mpich, ADAPTIVE, MPICH};
use super::{Ctx, Doc};

/// The slowdown strobe may have against MPICH (percent).
const GOAL_PERCENT: f64 = 10.0;

pub fn nas(ctx: &Ctx, doc: &mut Doc) -> Result<()> {
    let _ = writeln!(
        doc.body,
        "## NAS IS kernel (integer bucket sort, fixtures/c/nas_is.c)\n"
    );
    let (class, iters) = if ctx.quick { ("W", "3") } else { ("A", "10") };
    let _ = writeln!(
        doc.body,
        "Class {class}, {iters} timed iterations (each: Allreduce of the bucket counts, \
         Alltoall of the counts, Alltoallv of the keys, a local counting sort); the time is \
         the slowest rank's.\n"
    );
    let mut t = Table::new(&["ranks", "strobe (s)", "mpich (s)", "slowdown"]);
    for ranks in [2u32, 4] {
        let cfgs = versus_mpich(ctx, "nas_is", false)?;
        let a = args(&[
            &format!("class={class}"),
            &format!("iters={iters}"),
            "check=0",
        ]);
        let s = ctx.runner.alternate(&cfgs, ranks, &a, ctx.rounds);
        note_run(doc, &format!("nas_is class {class} on {ranks} ranks"), &s);
        let st = summ(&s, ADAPTIVE, |r| value(r, "nas_is", &[], "elapsed_s"));
        let mp = summ(&s, MPICH, |r| value(r, "nas_is", &[], "elapsed_s"));
        let slow = ratio_value(st, mp).map(|r| (r - 1.0) * 100.0);
        let shown = slow.map_or("—".into(), |x| format!("{x:+.2}%"));
        t.row(vec![ranks.to_string(), cell(st), cell(mp), shown.clone()]);
        doc.targets.push(Target {
            what: format!("NAS IS class {class} on {ranks} ranks, slowdown versus MPICH"),
            goal: format!("<= {GOAL_PERCENT}%"),
            measured: shown,
            met: slow.map(|x| x <= GOAL_PERCENT),
        });
    }
    let _ = writeln!(doc.body, "{}", t.render());
    Ok(())
}
