//! The Slurm launcher: inside an allocation (`salloc`, `sbatch`), one job step with one
//! daemon per node: `srun --nodes=K --ntasks=K --ntasks-per-node=1 --nodelist=h1,...
//! --export=ALL --kill-on-bad-exit=1 --cpu-bind=none --overlap PROGRAM ARGS...`.
//!
//! A daemon runs all of its node's ranks, so it must not be confined to one task's share:
//! `--cpu-bind=none` keeps task/affinity from binding it to one CPU (Slurm 22.05 gives a
//! step all of the node's CPUs unless `--exact`), and `--overlap` lets the step share the
//! allocation with the step the Machine Manager itself may run in (`srun strobe run` in a
//! batch script) instead of waiting for it forever.
//!
//! The host list comes from the allocation (`SLURM_JOB_NODELIST`, expanded here:
//! [`expand_nodelist`]). The daemon environment is set in srun's own environment and
//! `--export=ALL` carries it to the tasks (never argv). Each daemon's node index is
//! `SLURM_NODEID` (of the step; one task per node), see [`super::node_index_from_env`].

use std::io;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use super::{DaemonCommand, LaunchError, Launcher, NODES_ENV};

/// Starts the daemons as one srun step.
#[derive(Clone, Debug)]
pub struct SlurmLauncher {
    srun: PathBuf,
}

impl SlurmLauncher {
    /// `srun`: the program (default `srun` on `PATH`).
    pub fn new(srun: Option<PathBuf>) -> SlurmLauncher {
        SlurmLauncher {
            srun: srun.unwrap_or_else(|| PathBuf::from("srun")),
        }
    }

    /// The allocation's hosts, in Slurm's order (node 0 first).
    pub fn hosts_from_env() -> Result<Vec<String>, LaunchError> {
        let list = std::env::var("SLURM_JOB_NODELIST")
            .or_else(|_| std::env::var("SLURM_NODELIST"))
            .map_err(|_| LaunchError::NotInSlurm("SLURM_JOB_NODELIST"))?;
        expand_nodelist(&list)
    }

    /// The srun command (argv and environment) that starts `cmd` on `hosts`.
    pub fn command(&self, hosts: &[String], cmd: &DaemonCommand) -> Command {
        let k = hosts.len().to_string();
        let mut srun = Command::new(&self.srun);
        srun.arg(format!("--nodes={k}"))
            .arg(format!("--ntasks={k}"))
            .arg("--ntasks-per-node=1")
            .arg(format!("--nodelist={}", hosts.join(",")))
            .arg("--export=ALL")
            .arg("--kill-on-bad-exit=1")
            .arg("--cpu-bind=none")
            .arg("--overlap")
            .arg(&cmd.program)
            .args(&cmd.args)
            .envs(cmd.env.iter().map(|(k, v)| (k, v)))
            .env(NODES_ENV, &k);
        srun
    }
}

impl Launcher for SlurmLauncher {
    fn name(&self) -> &'static str {
        "slurm"
    }

    fn start(&self, hosts: &[String], cmd: &DaemonCommand) -> io::Result<Vec<Child>> {
        if hosts.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "no host"));
        }
        let child = self
            .command(hosts, cmd)
            .stdin(Stdio::piped())
            .spawn()
            .map_err(|e| super::spawn_error(e, "launcher", &self.srun))?;
        Ok(vec![child])
    }
}

/// Expands a Slurm host list: `node[01-03,7],login,rack[1-2]-n[1-2]` gives node01 node02
/// node03 node07 login rack1-n1 rack1-n2 rack2-n1 rack2-n2. A range keeps the zero padding
/// of its first number (`[08-10]` gives 08 09 10), as Slurm does.
pub fn expand_nodelist(list: &str) -> Result<Vec<String>, LaunchError> {
    let bad = || LaunchError::BadNodeList(list.to_string());
    let mut hosts = Vec::new();
    for item in split_top_level(list).ok_or_else(bad)? {
        if item.is_empty() {
            return Err(bad());
        }
        hosts.extend(expand_item(item).ok_or_else(bad)?);
    }
    if hosts.is_empty() {
        return Err(bad());
    }
    Ok(hosts)
}

/// Splits at commas outside brackets; `None` on unbalanced brackets.
fn split_top_level(list: &str) -> Option<Vec<&str>> {
    let (mut depth, mut start, mut items) = (0u32, 0, Vec::new());
    for (i, c) in list.char_indices() {
        match c {
            '[' if depth == 0 => depth = 1,
            ']' if depth == 1 => depth = 0,
            '[' | ']' => return None,
            ',' if depth == 0 => {
                items.push(list[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    (depth == 0).then(|| {
        items.push(list[start..].trim());
        items
    })
}

/// One item with any number of bracket groups: the product of their expansions.
fn expand_item(item: &str) -> Option<Vec<String>> {
    let Some(open) = item.find('[') else {
        return Some(vec![item.to_string()]);
    };
    let close = open + item[open..].find(']')?;
    let (prefix, group, rest) = (&item[..open], &item[open + 1..close], &item[close + 1..]);
    let tails = expand_item(rest)?;
    let mut out = Vec::new();
    for number in expand_group(group)? {
        for tail in &tails {
            out.push(format!("{prefix}{number}{tail}"));
        }
    }
    Some(out)
}

/// `01-03,7` -> 01 02 03 7.
fn expand_group(group: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for part in group.split(',') {
        let part = part.trim();
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        match part.split_once('-') {
            Some((lo, hi)) if digits(lo) && digits(hi) => {
                let (a, b): (u64, u64) = (lo.parse().ok()?, hi.parse().ok()?);
                if a > b || b - a > 100_000 {
                    return None;
                }
                out.extend((a..=b).map(|n| format!("{n:0width$}", width = lo.len())));
            }
            None if digits(part) => out.push(part.to_string()),
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand(list: &str) -> Vec<String> {
        expand_nodelist(list).unwrap()
    }

    #[test]
    fn node_lists_expand() {
        assert_eq!(expand("h1"), ["h1"]);
        assert_eq!(expand("h1,h2"), ["h1", "h2"]);
        assert_eq!(
            expand("node[01-03,7],login"),
            ["node01", "node02", "node03", "node7", "login"]
        );
        assert_eq!(expand("n[08-10]"), ["n08", "n09", "n10"]);
        assert_eq!(
            expand("rack[1-2]-n[1-2]"),
            ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]
        );
        assert_eq!(expand("c[5]x"), ["c5x"]);
    }

    #[test]
    fn malformed_node_lists_are_errors() {
        for bad in [
            "", "a,,b", "n[1-", "n[3-1]", "n[a-b]", "n]1[", "n[[1]]", "n[1-2-3]",
        ] {
            assert!(expand_nodelist(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn srun_command_keeps_env_out_of_argv() {
        let cmd = DaemonCommand {
            program: "/opt/strobe".into(),
            args: vec!["node".into()],
            env: vec![("STROBE_JOB_SECRET".into(), "c0ffee".into())],
        };
        let srun = SlurmLauncher::new(None).command(&["a".into(), "b".into()], &cmd);
        let argv: Vec<String> = srun
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            argv,
            [
                "--nodes=2",
                "--ntasks=2",
                "--ntasks-per-node=1",
                "--nodelist=a,b",
                "--export=ALL",
                "--kill-on-bad-exit=1",
                "--cpu-bind=none",
                "--overlap",
                "/opt/strobe",
                "node"
            ]
        );
        assert!(!argv.iter().any(|a| a.contains("c0ffee")));
    }
}
