//! The C fixture suite (`fixtures/c/`): reads its manifest, builds the programs with an MPI
//! compiler wrapper, runs them under a launcher with a deadline, and judges each run
//! against the fixture's expected verdict. Used with MPICH (`mpicc.mpich`,
//! `mpiexec.mpich`) to prove the fixtures are standard MPI, and with strobe
//! (`strobe mpicc`, `strobe run`) once the C ABI exists.

use std::fs::File;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The directory holding the C sources and `manifest.toml`.
pub fn source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/c")
}

/// What a run of a fixture must end in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Exit 0 and rank 0's summary line "<stem> ok ...".
    Pass,
    /// Every rank blocked forever.
    Deadlock,
    /// A rank killed by SIGSEGV.
    Segfault,
    /// A rank called `MPI_Abort` with this code.
    Abort(i32),
    /// Passes, or fails its `assert()` (SIGABRT), depending on message arrival order.
    Heisenbug,
}

/// One `[[fixture]]` of the manifest.
#[derive(Debug, Clone)]
pub struct Fixture {
    pub name: String,
    pub source: String,
    pub args: Vec<String>,
    pub bench_args: Vec<String>,
    pub ranks: Vec<u32>,
    pub verdict: Verdict,
    pub env: Vec<(String, String)>,
}

impl Fixture {
    /// The program's name: its source file without `.c` (two entries may share one).
    pub fn stem(&self) -> &str {
        self.source.trim_end_matches(".c")
    }
}

/// The manifest as written: `[[fixture]]` tables; unknown keys are errors (a typo must not
/// silently drop a setting).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestFile {
    #[serde(default)]
    fixture: Vec<FixtureEntry>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FixtureEntry {
    name: String,
    source: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    bench_args: Vec<String>,
    ranks: Vec<u32>,
    verdict: String,
    abort_code: Option<i32>,
    #[serde(default)]
    env: Vec<String>,
}

impl FixtureEntry {
    fn check(self) -> Result<Fixture, String> {
        let name = self.name;
        if self.ranks.is_empty() || self.ranks.contains(&0) {
            return Err(format!("{name}: ranks must be positive integers"));
        }
        let verdict = match self.verdict.as_str() {
            "pass" => Verdict::Pass,
            "deadlock" => Verdict::Deadlock,
            "segfault" => Verdict::Segfault,
            "heisenbug" => Verdict::Heisenbug,
            "abort" => match self.abort_code {
                Some(c) => Verdict::Abort(c),
                None => return Err(format!("{name}: verdict abort needs abort_code")),
            },
            other => return Err(format!("{name}: unknown verdict {other}")),
        };
        let env = self
            .env
            .iter()
            .map(|kv| {
                kv.split_once('=')
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .ok_or(format!("{name}: env entry {kv:?} is not KEY=VALUE"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Fixture {
            name,
            source: self.source,
            args: self.args,
            bench_args: self.bench_args,
            ranks: self.ranks,
            verdict,
            env,
        })
    }
}

/// Parses `manifest.toml` (see the comment at its top for the format).
pub fn parse_manifest(text: &str) -> Result<Vec<Fixture>, String> {
    let file: ManifestFile = toml::from_str(text).map_err(|e| e.to_string())?;
    file.fixture.into_iter().map(FixtureEntry::check).collect()
}

/// The manifest of the checked-in suite.
pub fn manifest() -> Vec<Fixture> {
    let path = source_dir().join("manifest.toml");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    parse_manifest(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// How a launched job ended.
#[derive(Debug)]
pub struct JobEnd {
    /// Exit status, or None when it was killed at the deadline (it hung).
    pub code: Option<i32>,
    /// Signal that killed the launcher itself, if any.
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl JobEnd {
    pub fn describe(&self) -> String {
        format!(
            "exit {:?} signal {:?} after {:.1?}\nstdout:\n{}\nstderr:\n{}",
            self.code,
            self.signal,
            self.elapsed,
            tail(&self.stdout, 2000),
            tail(&self.stderr, 3000)
        )
    }
}

fn tail(s: &str, n: usize) -> &str {
    let mut start = s.len().saturating_sub(n);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// Runs `cmd` in its own process group with stdin closed and output into files (a pipe
/// could fill up while we wait), and kills the whole group at `deadline`.
pub fn run_with_deadline(mut cmd: Command, deadline: Duration) -> JobEnd {
    let dir = tempfile::tempdir().expect("temp dir");
    let out_path = dir.path().join("stdout");
    let err_path = dir.path().join("stderr");
    cmd.stdin(Stdio::null())
        .stdout(File::create(&out_path).expect("stdout file"))
        .stderr(File::create(&err_path).expect("stderr file"))
        .process_group(0);
    let start = Instant::now();
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break Some(st);
        }
        if start.elapsed() > deadline {
            // The launcher and every rank share the process group we gave it.
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = start.elapsed();
    let read = |p: &Path| {
        let mut s = Vec::new();
        File::open(p)
            .and_then(|mut f| f.read_to_end(&mut s))
            .expect("read output");
        String::from_utf8_lossy(&s).into_owned()
    };
    JobEnd {
        code: status.and_then(|s| s.code()),
        signal: status.and_then(|s| s.signal()),
        stdout: read(&out_path),
        stderr: read(&err_path),
        elapsed,
    }
}

/// Which launcher ran a job: they report the same failure differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    /// `strobe run`: 128+signal for a killed rank, 3 for a deadlock (docs/cli.md).
    Strobe,
    /// MPICH's Hydra: the signal number itself as exit status plus "(signal N)" in its
    /// report; no deadlock detection (a deadlocked job hangs until our deadline).
    Mpich,
}

fn died_of(end: &JobEnd, launcher: Launcher, signal: i32) -> bool {
    match launcher {
        Launcher::Strobe => end.code == Some(128 + signal),
        Launcher::Mpich => {
            // Hydra's exit status is that of whichever process it saw end first, which is
            // racy: often the signalled rank (status = signal number), sometimes a rank it
            // killed while cleaning up (SIGTERM, 15). Its report names the first process
            // that went wrong ("EXIT CODE: 11") in either case.
            let report = format!("{}{}", end.stdout, end.stderr);
            end.code.is_some_and(|c| c != 0)
                && (report.contains(&format!("EXIT CODE: {signal}\n"))
                    || report.contains(&format!("(signal {signal})")))
        }
    }
}

/// Checks a finished run against the fixture's verdict; Err says what went wrong.
pub fn judge(fx: &Fixture, launcher: Launcher, end: &JobEnd) -> Result<(), String> {
    let summary = format!("{} ok", fx.stem());
    // Hydra forwards each rank's output as it reads it and has split a line written in one
    // `write` from its newline, with another rank's line in between ("rank 2 draws ...
    // random=4c64time_seed ok ranks=4 ..."): with MPICH the summary may follow other text on
    // its line. strobe's ranks write to the launcher's stdout directly, where a line written
    // at once stays whole.
    let summary_line = |l: &str| match launcher {
        Launcher::Strobe => l.starts_with(&summary),
        Launcher::Mpich => l.contains(&summary),
    };
    let passed = end.code == Some(0) && end.stdout.lines().any(summary_line);
    let ok = match fx.verdict {
        Verdict::Pass => passed,
        Verdict::Deadlock => match launcher {
            Launcher::Strobe => end.code == Some(3),
            Launcher::Mpich => end.code.is_none() && end.signal.is_none(),
        },
        Verdict::Segfault => died_of(end, launcher, 11),
        Verdict::Abort(code) => end.code == Some(code),
        Verdict::Heisenbug => passed || died_of(end, launcher, 6),
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{} expected {:?}: {}",
            fx.name,
            fx.verdict,
            end.describe()
        ))
    }
}

/// Compiles every distinct source of `fixtures` with `compiler` (argv prefix, e.g.
/// `["mpicc.mpich"]` or `["strobe", "mpicc"]`) into `out_dir`; returns Err listing the
/// failures with the compiler's messages.
pub fn build_all(compiler: &[&str], fixtures: &[Fixture], out_dir: &Path) -> Result<(), String> {
    let mut failures = Vec::new();
    let mut built: Vec<&str> = Vec::new();
    for fx in fixtures {
        if built.contains(&fx.stem()) {
            continue;
        }
        built.push(fx.stem());
        let out = Command::new(compiler[0])
            .args(&compiler[1..])
            .args(["-std=c11", "-O2", "-g", "-Wall", "-Wextra", "-o"])
            .arg(out_dir.join(fx.stem()))
            .arg(source_dir().join(&fx.source))
            .arg("-I")
            .arg(source_dir())
            .output()
            .unwrap_or_else(|e| panic!("run {compiler:?}: {e}"));
        if !out.status.success() {
            failures.push(format!(
                "{}: {}",
                fx.source,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}
