//! `strobe doctor`: what this host offers the transports that depend on it. Today that is
//! verbs (RDMA): whether libibverbs loads, each device and port as libibverbs reports it,
//! the locked-memory limit, and the verdict `strobe run --transport verbs` would reach
//! (docs/cli.md; docs/multi-host.md, "RDMA (verbs)"). It is how a user checks a cluster
//! node: `pdsh -w node[01-64] strobe doctor` or `srun -N64 strobe doctor`.
//!
//! Exit status: 0 when verbs is usable, 1 when it is not (the verdict line says why), so a
//! cluster check can count the nodes that failed.

use anyhow::Result;
use strobe_runtime::transport::verbs::system::host_report;

pub fn doctor() -> Result<i32> {
    let (report, usable) = host_report();
    println!("verbs (RDMA):");
    for line in report.lines() {
        println!("  {line}");
    }
    Ok(if usable { 0 } else { 1 })
}
