//! `strobe bench` (no subcommand): the benchmark suite that measures strobe against MPICH
//! and against itself, side by side (issue 7). It builds the C benchmark fixtures with
//! `strobe mpicc` and with MPICH's `mpicc.mpich`, runs every configuration alternately after
//! a warm-up, and writes Markdown (medians, spreads, ratios, the machine and the exact
//! commands) plus PNG curves next to it. Figures are measured, never asserted.

mod build;
mod debugging;
mod hosts;
mod load;
mod nas;
mod plot;
mod report;
mod runner;
mod scale;
mod sections;
mod verbs;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

pub use build::Implementation;
use report::Target;
use runner::Runner;

/// What the user asked for.
#[derive(Clone, Debug)]
pub struct SuiteArgs {
    /// Small sizes and two rounds: under three minutes, a smoke test for CI.
    pub quick: bool,
    /// Rank counts for the collectives.
    pub ranks: Vec<u32>,
    /// Markdown output; PNGs go next to it.
    pub out: Option<PathBuf>,
    /// Rounds per configuration after the warm-up (default 5, quick 2).
    pub rounds: Option<usize>,
    /// Only these sections (p2p, logp, collectives, papers, nas, recording, scaling,
    /// debugging, scale, load, hosts, verbs).
    pub only: Vec<String>,
}

pub const SECTIONS: &[&str] = &[
    "p2p",
    "logp",
    "collectives",
    "papers",
    "nas",
    "recording",
    "scaling",
    "debugging",
    "scale",
    "load",
    "hosts",
    "verbs",
];

/// Everything the sections produce.
pub struct Doc {
    pub body: String,
    pub targets: Vec<Target>,
    pub commands: Vec<String>,
    pub notes: Vec<String>,
    /// Where plots go (the Markdown file's directory) and their names relative to it.
    pub plot_dir: Option<PathBuf>,
    pub plot_prefix: String,
}

impl Doc {
    pub fn plot(&mut self, name: &str, p: &plot::Plot<'_>) {
        let Some(dir) = &self.plot_dir else { return };
        let file = format!("{}{name}.png", self.plot_prefix);
        match plot::draw(p, &dir.join(&file)) {
            Ok(()) => {
                let _ = writeln!(self.body, "\n![{}]({file})\n", p.title);
            }
            Err(e) => self.notes.push(format!("plot {file} not drawn: {e:#}")),
        }
    }
}

/// The suite's context: the runner, where binaries are, which implementations exist.
pub struct Ctx {
    pub runner: Runner,
    pub build_dir: PathBuf,
    pub mpich: bool,
    pub quick: bool,
    pub rounds: usize,
    pub ranks: Vec<u32>,
    pub replay: bool,
}

impl Ctx {
    /// The fixture `stem` built for `imp` (built on first use).
    pub fn binary(&self, imp: Implementation, stem: &str) -> Result<PathBuf> {
        let bin = self.build_dir.join(imp.name()).join(stem);
        if bin.exists() {
            return Ok(bin);
        }
        build::build(imp, stem, &self.build_dir)
    }
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines().next().and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|k| k.parse::<u64>().ok())
            })
        })
        .map_or("?".into(), |kb| format!("{:.0} GiB", kb as f64 / 1048576.0));
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    format!("{cpu}, {cores} cores, {mem}, Linux {kernel}")
}

/// Whether this strobe can replay (the replayer is built in).
fn has_replay(strobe: &Path) -> bool {
    std::process::Command::new(strobe)
        .args(["replay", "--help"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub fn run(args: SuiteArgs) -> Result<()> {
    let t0 = Instant::now();
    let strobe = crate::paths::strobe_exe()?;
    let build_dir = strobe
        .parent()
        .map_or_else(|| PathBuf::from("target"), Path::to_path_buf)
        .join("bench-suite");
    let work_dir = build_dir.join("work");
    std::fs::create_dir_all(&work_dir)
        .with_context(|| format!("cannot create {}", work_dir.display()))?;
    let mut notes = Vec::new();
    let mpich_version = match build::ensure_mpich() {
        Ok(v) => Some(v),
        Err(e) => {
            eprintln!("strobe bench: measuring strobe alone: {e:#}");
            notes.push(format!("MPICH unavailable, strobe measured alone: {e:#}"));
            None
        }
    };
    // Fresh binaries every time: a stale build would measure old code.
    let _ = std::fs::remove_dir_all(build_dir.join("strobe"));
    let _ = std::fs::remove_dir_all(build_dir.join("mpich"));
    let ctx = Ctx {
        runner: Runner {
            strobe: strobe.clone(),
            work_dir,
            timeout: Duration::from_secs(if args.quick { 120 } else { 600 }),
            verbose: true,
        },
        build_dir,
        mpich: mpich_version.is_some(),
        quick: args.quick,
        rounds: args.rounds.unwrap_or(if args.quick { 2 } else { 5 }),
        ranks: args.ranks.clone(),
        replay: has_replay(&strobe),
    };
    let plot_dir = args
        .out
        .as_ref()
        .map(|o| {
            o.parent()
                .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
        })
        .map(|d| {
            if d.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                d
            }
        });
    let mut doc = Doc {
        body: String::new(),
        targets: Vec::new(),
        commands: Vec::new(),
        notes,
        plot_dir,
        plot_prefix: if args.quick {
            "bench-quick-".into()
        } else {
            "bench-".into()
        },
    };
    let wanted = |s: &str| args.only.is_empty() || args.only.iter().any(|o| o == s);
    for section in SECTIONS {
        if !wanted(section) {
            continue;
        }
        eprintln!("strobe bench: {section}");
        let r = match *section {
            "p2p" => sections::p2p(&ctx, &mut doc),
            "logp" => sections::logp(&ctx, &mut doc),
            "collectives" => sections::collectives(&ctx, &mut doc),
            "papers" => sections::papers(&ctx, &mut doc),
            "nas" => nas::nas(&ctx, &mut doc),
            "recording" => sections::recording(&ctx, &mut doc),
            "scaling" => sections::scaling(&ctx, &mut doc),
            "debugging" => debugging::debugging(&ctx, &mut doc),
            "scale" => scale::scale(&ctx, &mut doc),
            "load" => load::load(&ctx, &mut doc),
            "hosts" => hosts::hosts(&ctx, &mut doc),
            "verbs" => verbs::verbs(&ctx, &mut doc),
            _ => unreachable!(),
        };
        if let Err(e) = r {
            let msg = format!("section {section} failed: {e:#}");
            eprintln!("strobe bench: {msg}");
            doc.notes.push(msg);
        }
    }
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# strobe bench{}\n",
        if args.quick { " --quick" } else { "" }
    );
    let _ = writeln!(
        md,
        "Generated by `strobe bench{}` ({} s). Medians of {} alternating rounds after a warm-up; \
         `±` is half the range of the rounds relative to the median. Ratios are strobe over \
         MPICH unless a column says otherwise.\n",
        if args.quick { " --quick" } else { "" },
        t0.elapsed().as_secs(),
        ctx.rounds
    );
    let _ = writeln!(
        md,
        "Measurements of strobe's components (empty slices, the validation run, the terminal \
         UI, recording and replay on the Rust fixtures) are in \
         [benchmarks-detail.md](benchmarks-detail.md).\n"
    );
    let _ = writeln!(md, "- Machine: {}", machine());
    let _ = writeln!(md, "- strobe {}", env!("CARGO_PKG_VERSION"));
    let _ = writeln!(
        md,
        "- {}",
        mpich_version.as_deref().unwrap_or("MPICH: not available")
    );
    let _ = writeln!(
        md,
        "- Binaries: `strobe mpicc -std=c11 -O2` and `mpicc.mpich -std=c11 -O2` of fixtures/c/\n"
    );
    let _ = writeln!(md, "## Targets\n");
    md.push_str(&report::targets_table(&doc.targets));
    md.push('\n');
    md.push_str(&doc.body);
    if !doc.notes.is_empty() {
        let _ = writeln!(md, "\n## Notes\n");
        for n in &doc.notes {
            let _ = writeln!(md, "- {n}");
        }
    }
    let _ = writeln!(md, "\n## Commands\n\n```");
    for c in &doc.commands {
        let _ = writeln!(md, "{c}");
    }
    let _ = writeln!(md, "```");
    match &args.out {
        Some(p) => {
            std::fs::write(p, &md).with_context(|| format!("cannot write {}", p.display()))?;
            eprintln!("strobe bench: wrote {}", p.display());
        }
        None => print!("{md}"),
    }
    Ok(())
}
