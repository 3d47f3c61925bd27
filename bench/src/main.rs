//! `strobe-bench`: strobe's benchmark suite and measurements of the runtime itself
//! (`strobe bench` runs this tool). Figures are measured, never asserted; the output is
//! Markdown meant to be kept in `docs/` (docs/benchmarks.md, docs/benchmarks-detail.md).
//!
//! It is a developer tool, separate from the shipped `strobe` binary: it compiles the C
//! benchmark fixtures of the source tree, installs Debian's MPICH to compare against, and
//! draws PNG plots.

mod micro;
mod paths;
mod record_overhead;
mod suite;
mod tcp;
mod wire;
mod writer;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

/// The benchmark suite: strobe against MPICH and against itself, side by side (with a
/// subcommand: one measurement of the runtime itself). Figures are Markdown for docs/.
#[derive(Parser)]
#[command(name = "strobe-bench", bin_name = "strobe bench", version)]
struct Cli {
    #[command(subcommand)]
    what: Option<BenchCmd>,
    /// Also write the Markdown to this file (the suite draws its PNGs next to it).
    #[arg(long, global = true)]
    out: Option<PathBuf>,
    /// Suite: small sizes and two rounds, under three minutes (a CI smoke test).
    #[arg(long)]
    quick: bool,
    /// Suite: rank counts for the collectives.
    #[arg(long, value_delimiter = ',', default_value = "2,4,8")]
    ranks: Vec<u32>,
    /// Suite: rounds per configuration after the warm-up (default 5, 2 with --quick).
    #[arg(long)]
    rounds: Option<usize>,
    /// Suite: only these sections (p2p, logp, collectives, papers, nas, recording, scaling,
    /// debugging, scale, load, hosts, verbs).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

#[derive(Subcommand)]
enum BenchCmd {
    /// The TUI's History tab on an existing recording: the frame after `5`, and the time
    /// until rank RANK's match history is read and drawn.
    History {
        /// The recording (e.g. made with `strobe record -n 4 -- exchange 0 20000 64`).
        db: PathBuf,
        #[arg(long, default_value_t = 0)]
        rank: u32,
        /// Also time the former implementation's pass (decoding every slice's decision
        /// blob): minutes on a big recording.
        #[arg(long)]
        baseline: bool,
    },
    /// Cost of one empty slice versus the number of ranks.
    EmptySlice {
        #[arg(long, value_delimiter = ',', default_value = "2,4,8,16,32,64")]
        ranks: Vec<u32>,
        #[arg(long, value_delimiter = ',', default_value = "1")]
        nodes: Vec<u32>,
        /// How long the ranks stay idle, in milliseconds.
        #[arg(long, default_value_t = 300)]
        idle_ms: u32,
    },
    /// Recording overhead: `strobe run` versus `strobe record` with different layers, on
    /// the papers' synthetic benchmarks (10 ms granularity) and a message-heavy job.
    Record {
        #[arg(short = 'n', long, default_value_t = 4)]
        ranks: u32,
        /// Measured rounds (each runs every mode once), after one warm-up round.
        #[arg(long, default_value_t = 5)]
        rounds: u32,
        /// Iterations of the 10 ms synthetic benchmarks.
        #[arg(long, default_value_t = 100)]
        iterations: u64,
        /// Iterations of the message-heavy exchange.
        #[arg(long, default_value_t = 2000)]
        heavy_iterations: u64,
    },
    /// The papers' validation run: barrier every 1.9 ms under fixed 250 us slices.
    Validation {
        #[arg(short = 'n', long, default_value_t = 2)]
        ranks: u32,
        #[arg(long, default_value_t = 2000)]
        iterations: u32,
    },
    /// The TCP transport: empty-slice cost versus endpoints over loopback TCP.
    TcpSlice {
        #[arg(long, value_delimiter = ',', default_value = "2,4,8,16,32,64")]
        endpoints: Vec<u32>,
        /// Measured slices per endpoint count (after 50 warm-up slices).
        #[arg(long, default_value_t = 1000)]
        slices: u64,
    },
    /// The TCP transport: latency and bandwidth between two scripts/hosts.sh test hosts
    /// (as root; two processes on loopback otherwise).
    TcpLink,
    /// One recorder (the Machine Manager's SQLite writer) fed quiet slices of N nodes:
    /// the slices per second it sustains, for the scale projection (docs/multi-host.md).
    WriterRate {
        /// Node counts, comma-separated.
        #[arg(long, value_delimiter = ',', default_values_t = vec![1, 16, 64, 256, 1024])]
        nodes: Vec<u32>,
        /// Node metrics rows to write per node count (slices = this / nodes, at least 200).
        #[arg(long, default_value_t = 200_000)]
        rows: u64,
    },
    /// One endpoint process of `tcp-link` (started by it).
    #[command(hide = true)]
    TcpPeer {
        node: u32,
        listen: std::net::SocketAddr,
    },
    /// Recording across hosts: sink frames' bytes per slice and per descriptor, CPU per
    /// frame, and wall time through the wire versus direct (docs/multi-host.md).
    WireSink {
        #[arg(short = 'n', long, default_value_t = 4)]
        ranks: u32,
        #[arg(long, default_value_t = 2)]
        nodes: u32,
        #[arg(long, default_value_t = 5)]
        rounds: u32,
        /// Iterations of the message-heavy exchange.
        #[arg(long, default_value_t = 2000)]
        heavy_iterations: u64,
    },
    /// The terminal UI on a synthetic recording: first frame and key presses.
    Tui {
        #[arg(long, default_value_t = 1_000_000)]
        slices: u64,
        #[arg(long, default_value_t = 64)]
        ranks: u32,
        #[arg(long, default_value_t = 4)]
        nodes: u32,
        /// Keep (and reuse, if it exists) the synthetic recording at this path.
        #[arg(long)]
        db: Option<PathBuf>,
    },
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.what {
        Some(what) => bench_cmd(what, cli.out),
        None => suite::run(suite::SuiteArgs {
            quick: cli.quick,
            ranks: cli.ranks,
            out: cli.out,
            rounds: cli.rounds,
            only: cli.only,
        })
        .map(|()| 0),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("strobe bench: {e:#}");
            std::process::exit(1);
        }
    }
}

fn bench_cmd(what: BenchCmd, out: Option<PathBuf>) -> Result<i32> {
    let text = match what {
        BenchCmd::EmptySlice {
            ranks,
            nodes,
            idle_ms,
        } => micro::empty_slice(&ranks, &nodes, idle_ms)?,
        BenchCmd::Validation { ranks, iterations } => micro::validation(ranks, iterations)?,
        BenchCmd::TcpSlice { endpoints, slices } => tcp::empty_slice(&endpoints, slices)?,
        BenchCmd::TcpLink => tcp::link()?,
        BenchCmd::WriterRate { nodes, rows } => writer::writer_rate(&nodes, rows)?,
        BenchCmd::WireSink {
            ranks,
            nodes,
            rounds,
            heavy_iterations,
        } => wire::wire_sink(ranks, nodes, rounds, heavy_iterations)?,
        BenchCmd::TcpPeer { node, listen } => tcp::peer(node, listen)?,
        BenchCmd::Tui {
            slices,
            ranks,
            nodes,
            db,
        } => micro::tui(slices, ranks, nodes, db)?,
        BenchCmd::History { db, rank, baseline } => {
            strobe_tui::bench::measure_history(&db, rank, 120, 40, baseline)
                .with_context(|| format!("reading {}", db.display()))?
        }
        BenchCmd::Record {
            ranks,
            rounds,
            iterations,
            heavy_iterations,
        } => record_overhead::record_overhead(ranks, rounds, iterations, heavy_iterations)?,
    };
    print!("{text}");
    if let Some(p) = out {
        std::fs::write(&p, &text).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(0)
}
