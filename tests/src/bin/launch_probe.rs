//! A stand-in for `strobe node` that the launcher tests start on each (test) host.
//!
//! `launch_probe --out DIR [--hold FILE] [--env-stdin] [--pmi]` writes `DIR/node-I` (the
//! test hosts share this machine's file system; a launcher's stdout is the user's) with a
//! line
//! `probe host=H node=I nodes=K env=stdin|env secret=yes|no` (the secret itself never),
//! where the node comes from `STROBE_NODE`/`PMI_RANK`/`SLURM_NODEID` as a daemon's would.
//! With `--env-stdin` it first reads `KEY=VALUE` lines up to an empty line from stdin,
//! as the ssh launcher sends them. With `--pmi` it puts its hostname in PMI's key-value
//! space under `host-<rank>`, fences, and adds `peer R H` for every other rank.
//! With `--hold FILE` it then waits (up to 60 s) until FILE exists, so a test can look at
//! the running processes.

use std::collections::HashMap;
use std::io::{BufReader, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use strobe_runtime::daemon::launch::pmi::Pmi;
use strobe_runtime::daemon::launch::{node_index_in, ssh::read_env_lines};
use strobe_runtime::transport::auth::SECRET_ENV;

fn main() -> Result<()> {
    let (mut env_stdin, mut pmi, mut hold, mut out_dir) = (false, false, None, None);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--env-stdin" => env_stdin = true,
            "--pmi" => pmi = true,
            "--out" => out_dir = Some(PathBuf::from(args.next().context("--out DIR")?)),
            "--hold" => hold = Some(PathBuf::from(args.next().context("--hold FILE")?)),
            other => bail!("unknown argument {other:?}"),
        }
    }
    let sent: HashMap<String, String> = if env_stdin {
        read_env_lines(&mut BufReader::new(std::io::stdin()))?
            .into_iter()
            .collect()
    } else {
        HashMap::new()
    };
    let lookup = |k: &str| sent.get(k).cloned().or_else(|| std::env::var(k).ok());
    let (node, nodes) = node_index_in(lookup).context("no node index in the environment")?;
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")?
        .trim()
        .to_string();
    let secret = lookup(SECRET_ENV).is_some_and(|s| s.len() == 64);
    // The whole report, one line per fact.
    let mut out = format!(
        "probe host={host} node={node} nodes={nodes} env={} secret={}\n",
        if env_stdin { "stdin" } else { "env" },
        if secret { "yes" } else { "no" }
    );
    if pmi {
        let mut pmi = Pmi::from_env()?.context("--pmi: not started by a PMI-1 launcher")?;
        let names = pmi.allgather("host", &host)?;
        for (peer, name) in names.iter().enumerate() {
            if peer as u32 != pmi.rank() {
                out.push_str(&format!("peer {peer} {name}\n"));
            }
        }
        pmi.finalize()?;
    }
    // Written whole, then renamed: the test never reads half a file.
    let dir = out_dir.context("--out DIR is required")?;
    let part = dir.join(format!(".node-{node}"));
    std::fs::File::create(&part)?.write_all(out.as_bytes())?;
    std::fs::rename(&part, dir.join(format!("node-{node}")))?;
    if let Some(file) = hold {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !file.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Ok(())
}
