//! Running one benchmark program under several configurations, alternately (A B C A B C
//! ...) after a warm-up, and collecting its `RESULT` lines and wall time. Alternating keeps
//! slow drifts of a noisy machine (another build, thermal state) out of the ratios.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// How a configuration launches a job.
#[derive(Clone, Debug)]
pub enum Launch {
    /// `mpiexec.mpich -launcher fork -n N prog args`.
    Mpich,
    /// `strobe run -n N EXTRA... -- prog args`.
    StrobeRun(Vec<String>),
    /// `strobe record -o FILE --force -n N EXTRA... -- prog args` (FILE is per config).
    StrobeRecord(Vec<String>),
    /// `strobe replay FILE` of the recording the named configuration left.
    StrobeReplay { of: String },
    /// `mpiexec.mpich -launcher rsh -launcher-exec RSH -hosts H1,H2 -genv UCX_TLS tcp,self
    /// -n N prog args`: MPICH across `scripts/hosts.sh` test hosts over TCP. Debian's MPICH
    /// is ch4:ucx, and UCX may take two namespaces of one kernel for one node and try its
    /// shared-memory transports (they fail now and then: "Shared memory error"); TCP is
    /// what two real hosts would use.
    MpichHosts { hosts: String, rsh: String },
}

/// One side of a comparison.
#[derive(Clone, Debug)]
pub struct Config {
    pub label: String,
    pub launch: Launch,
    /// The binary to run (built for strobe or for MPICH).
    pub program: PathBuf,
}

/// One `RESULT name=... k=v ...` line.
pub type ResultLine = BTreeMap<String, String>;

/// What one run gave.
#[derive(Clone, Debug)]
pub struct Run {
    pub wall: Duration,
    pub results: Vec<ResultLine>,
    /// Size of the recording it wrote, if any.
    pub recording_bytes: Option<u64>,
}

/// Samples of every configuration, in the order they ran.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    pub runs: BTreeMap<String, Vec<Run>>,
    /// Configurations that failed, with why (the suite reports them and goes on).
    pub failures: BTreeMap<String, String>,
    /// The exact command line of each configuration's first run.
    pub commands: BTreeMap<String, String>,
}

pub struct Runner {
    pub strobe: PathBuf,
    pub work_dir: PathBuf,
    pub timeout: Duration,
    /// Print progress on stderr.
    pub verbose: bool,
}

impl Runner {
    fn recording_path(&self, label: &str) -> PathBuf {
        self.work_dir
            .join(format!("{}.db", label.replace(['/', ' '], "_")))
    }

    fn command(&self, cfg: &Config, ranks: u32, args: &[String]) -> Command {
        let mut c;
        match &cfg.launch {
            Launch::Mpich => {
                // `-launcher fork`: every rank on this host, no ssh (as the test suite does).
                c = Command::new("mpiexec.mpich");
                c.args(["-launcher", "fork"])
                    .arg("-n")
                    .arg(ranks.to_string())
                    .arg(&cfg.program);
                c.args(args);
            }
            Launch::StrobeRun(extra) => {
                c = Command::new(&self.strobe);
                c.arg("run").arg("-n").arg(ranks.to_string()).args(extra);
                c.arg("--").arg(&cfg.program).args(args);
            }
            Launch::StrobeRecord(extra) => {
                c = Command::new(&self.strobe);
                c.arg("record")
                    .arg("-o")
                    .arg(self.recording_path(&cfg.label))
                    .arg("--force")
                    .arg("-n")
                    .arg(ranks.to_string())
                    .args(extra);
                c.arg("--").arg(&cfg.program).args(args);
            }
            Launch::MpichHosts { hosts, rsh } => {
                c = Command::new("mpiexec.mpich");
                c.args(["-launcher", "rsh", "-launcher-exec", rsh, "-hosts", hosts])
                    .args(["-genv", "UCX_TLS", "tcp,self"])
                    .arg("-n")
                    .arg(ranks.to_string())
                    .arg(&cfg.program);
                c.args(args);
            }
            Launch::StrobeReplay { of } => {
                c = Command::new(&self.strobe);
                c.arg("replay").arg(self.recording_path(of));
            }
        }
        c
    }

    /// Runs once; `Err` when the job fails or times out.
    fn run_once(&self, cfg: &Config, ranks: u32, args: &[String]) -> Result<Run> {
        let mut cmd = self.command(cfg, ranks, args);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let t0 = Instant::now();
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {cmd:?}"))?;
        let pid = child.id();
        let timeout = self.timeout;
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let out = child.wait_with_output();
            let _ = tx.send(());
            out
        });
        if rx.recv_timeout(timeout).is_err() {
            // SAFETY: kill(2) on the child's pid; it has not been reaped (the waiter has not
            // returned), so the pid still names our child.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            let _ = waiter.join();
            anyhow::bail!("timed out after {timeout:?}");
        }
        let out = waiter
            .join()
            .map_err(|_| anyhow::anyhow!("waiter thread panicked"))??;
        let wall = t0.elapsed();
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = err.lines().rev().take(4).collect();
            anyhow::bail!(
                "{}: {}",
                out.status,
                tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
            );
        }
        let results = parse_results(&String::from_utf8_lossy(&out.stdout));
        let recording_bytes = match &cfg.launch {
            Launch::StrobeRecord(_) => recording_size(&self.recording_path(&cfg.label)),
            _ => None,
        };
        Ok(Run {
            wall,
            results,
            recording_bytes,
        })
    }

    /// Warm-up once each, then `reps` rounds of every configuration in turn.
    pub fn alternate(
        &self,
        configs: &[Config],
        ranks: u32,
        args: &[String],
        reps: usize,
    ) -> Samples {
        let mut s = Samples::default();
        for cfg in configs {
            let cmd = self.command(cfg, ranks, args);
            s.commands.insert(cfg.label.clone(), display_command(&cmd));
        }
        for round in 0..=reps {
            for cfg in configs {
                if s.failures.contains_key(&cfg.label) {
                    continue;
                }
                if self.verbose {
                    eprint!(
                        "  {} n={} {} {}\r",
                        cfg.label,
                        ranks,
                        if round == 0 { "warm-up" } else { "run" },
                        round
                    );
                }
                match self.run_once(cfg, ranks, args) {
                    Ok(run) if round > 0 => s.runs.entry(cfg.label.clone()).or_default().push(run),
                    Ok(_) => {}
                    Err(e) => {
                        s.failures.insert(cfg.label.clone(), format!("{e:#}"));
                    }
                }
            }
        }
        if self.verbose {
            eprint!("{:70}\r", "");
        }
        s
    }

    pub fn recording(&self, label: &str) -> PathBuf {
        self.recording_path(label)
    }
}

/// A recording's size: the database plus its write-ahead log if one is left.
fn recording_size(p: &Path) -> Option<u64> {
    let main = std::fs::metadata(p).ok()?.len();
    let wal = std::fs::metadata(p.with_extension("db-wal")).map_or(0, |m| m.len());
    Some(main + wal)
}

fn display_command(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    if let Some(name) = Path::new(&s).file_name() {
        if name == "strobe" {
            s = "strobe".into();
        }
    }
    for a in cmd.get_args() {
        let a = a.to_string_lossy();
        s.push(' ');
        s.push_str(&a);
    }
    s
}

/// `RESULT name=x k=v ...` lines of a program's output.
pub fn parse_results(stdout: &str) -> Vec<ResultLine> {
    stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("RESULT "))
        .map(|rest| {
            rest.split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

/// The value of `field` in the result line named `name` whose other keys match `with`.
pub fn value(run: &Run, name: &str, with: &[(&str, &str)], field: &str) -> Option<f64> {
    run.results
        .iter()
        .find(|r| {
            r.get("name").map(String::as_str) == Some(name)
                && with
                    .iter()
                    .all(|(k, v)| r.get(*k).map(String::as_str) == Some(*v))
        })
        .and_then(|r| r.get(field))
        .and_then(|v| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_lines_are_parsed_and_found() {
        let out = "hello\nRESULT name=latency bytes=8 reps=10 usec=1.50\nRESULT name=latency bytes=16 usec=2\nbench ok\n";
        let r = parse_results(out);
        assert_eq!(r.len(), 2);
        let run = Run {
            wall: Duration::ZERO,
            results: r,
            recording_bytes: None,
        };
        assert_eq!(value(&run, "latency", &[("bytes", "8")], "usec"), Some(1.5));
        assert_eq!(
            value(&run, "latency", &[("bytes", "16")], "usec"),
            Some(2.0)
        );
        assert_eq!(value(&run, "latency", &[("bytes", "32")], "usec"), None);
    }
}
