//! `strobe replay`: re-execute a recording (the `strobe-replayer` crate) with the terminal
//! stepper and the control socket as clients of its control API.

use std::ffi::OsString;
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use strobe_replayer::socket::ControlServer;
use strobe_replayer::{Break, Controller, Event, ReplayOptions, EXIT_CANNOT_START};

use crate::cli_util;

mod gdb;

#[derive(Args)]
pub struct ReplayArgs {
    /// The recording to replay (written by `strobe record`).
    file: PathBuf,
    /// Accept a recording of up to N ranks without checking them against this machine
    /// (pid_max, RLIMIT_NPROC, memory); without it a recording too large is refused.
    #[arg(long, value_name = "N")]
    max_ranks: Option<u32>,
    /// Do not print the correctness checks' findings of the replayed run.
    #[arg(long)]
    no_checks: bool,
    /// Run this program instead of the recorded one (e.g. a rebuild with debug symbols).
    /// Refused when its SHA-256 differs from the recorded one, unless
    /// --allow-different-binary.
    #[arg(long, value_name = "PATH")]
    program: Option<PathBuf>,
    /// Replay a --program whose SHA-256 differs from the recorded program (warns).
    #[arg(long)]
    allow_different_binary: bool,
    /// Hold every rank at the start of slice S, print their pids and gdb commands, and stay
    /// held until told to continue (control socket, or the terminal) or Ctrl-C.
    #[arg(long, value_name = "S")]
    until_slice: Option<u64>,
    /// Stop at a breakpoint: `slice=S`, or `rank=R,call=MPI_Recv` (after the slice that
    /// handled that call of that rank). Repeatable.
    #[arg(long = "break", value_name = "SPEC")]
    breaks: Vec<Break>,
    /// Keep every rank alive and held at a replayed failure (deadlock, livelock, a failed
    /// rank) instead of ending the job: held before the slice the recording failed in,
    /// with pids and gdb commands printed (docs/replay-control.md).
    #[arg(long)]
    hold_at_failure: bool,
    /// When the replay stops (a failure, which --gdb holds at, --until-slice, a
    /// breakpoint), start gdb attached to rank RANK: in a new tmux window inside tmux,
    /// else in the foreground (the replay ends when gdb exits).
    #[arg(long, value_name = "RANK", conflicts_with = "tui")]
    gdb: Option<u32>,
    /// The debugger command for --gdb (and `x` in --tui), run by sh; {pid} and {rank} are
    /// replaced (default: $STROBE_GDB, else `gdb -p {pid}`).
    #[arg(long, value_name = "CMD")]
    gdb_command: Option<String>,
    /// Step slice by slice from the terminal (next, continue, run N, print, break, quit).
    #[arg(long)]
    step: bool,
    /// Serve the control protocol on this Unix socket (docs/replay-control.md). Default
    /// when stopping or stepping: replay.sock in a fresh private (0700) directory under
    /// $XDG_RUNTIME_DIR or $TMPDIR. An existing file or a live socket at PATH is refused.
    #[arg(long, value_name = "PATH")]
    control: Option<PathBuf>,
    /// Write a full recording of the replay (schedule log regenerated) to FILE.
    #[arg(long = "record", value_name = "FILE")]
    record: Option<PathBuf>,
    /// Overwrite the --record FILE.
    #[arg(long)]
    force: bool,
    /// Prefix each line of rank output with `[rank] `.
    #[arg(long)]
    tag_output: bool,
    /// Stop the replay after this long.
    #[arg(long, value_parser = cli_util::parse_duration)]
    timeout: Option<Duration>,
    /// Replay inside the terminal UI (docs/tui.md, "Live replay"): held before slice 1;
    /// space runs and pauses, n steps, b and B set breakpoints, x starts gdb on the rank. The
    /// ranks' output goes to --output (default $TMPDIR/strobe-replay-PID.out).
    #[arg(long, conflicts_with_all = ["step", "control"])]
    tui: bool,
    /// With --tui: the file the ranks' stdout and stderr go to.
    #[arg(long, value_name = "FILE", requires = "tui")]
    output: Option<PathBuf>,
    /// Print what would run (program, hash verdict, arguments, working directory,
    /// environment) and exit without running anything: 0, or 2 if the replay is refused.
    #[arg(long)]
    dry_run: bool,
    /// Confirm running a launch this user did not record (a copied or edited recording)
    /// or a different binary, without the terminal prompt (needed when stdin is not a
    /// terminal). Check with --dry-run first.
    #[arg(long)]
    yes: bool,
    /// Pass KEY=VALUE to the ranks (recorded variables outside the allow-list are not
    /// passed: docs/cli.md). Repeatable.
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = parse_env)]
    env: Vec<(OsString, OsString)>,
    /// Pass this variable from strobe's own environment to the ranks, overriding the
    /// recording's. Repeatable.
    #[arg(long = "pass-env", value_name = "KEY")]
    pass_env: Vec<OsString>,
    /// Run in DIR instead of the recorded working directory.
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// Run the replay on K node managers instead of the recorded number: a recording made
    /// on any number of nodes or hosts replays on this machine (decisions do not depend on
    /// the node layout; docs/multi-host.md, "Recording across hosts").
    #[arg(long, value_name = "K")]
    nodes: Option<u32>,
    /// Replay rank R alone: no other rank process, no node manager; its receives and
    /// collective results come from the payloads `strobe record --capture-payloads`
    /// stored, and every call it makes is checked against the recording (docs/debugging.md).
    /// With `--gdb R` the debugger attaches to it before its first MPI call.
    #[arg(long, value_name = "R", conflicts_with_all = ["tui", "step", "control", "record", "until_slice", "breaks", "hold_at_failure"])]
    rank: Option<u32>,
    /// Across hosts: `--hosts`, `--launcher local --nodes K`, ... as for `strobe run`
    /// (the hosts need not be the recorded ones; docs/multi-host.md, "Replay across
    /// hosts"). Stopping and stepping options are for a replay on this host.
    #[command(flatten)]
    hosts: crate::multi_host::HostArgs,
    /// The program's arguments, replacing the recorded ones (after `--`; needed when the
    /// recording's arguments were redacted).
    #[arg(last = true, value_name = "ARGS")]
    args: Vec<OsString>,
}

fn parse_env(s: &str) -> Result<(OsString, OsString), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.into(), v.into())),
        _ => Err(format!("{s:?} is not KEY=VALUE")),
    }
}

/// Whether a recorded failure is held for a debugger (`--hold-at-failure`, `--gdb`).
fn holds_at_failure(a: &ReplayArgs) -> bool {
    a.hold_at_failure || a.gdb.is_some()
}

/// The options of `--gdb` and `--hold-at-failure`, checked against the recording: the hold
/// (slice, why) to set, or the exit status for a refusal (one line, exit 2). A file that
/// cannot be read is left to the replayer to report.
fn check_failure_hold(a: &ReplayArgs) -> Result<Option<(u64, String)>, i32> {
    if !holds_at_failure(a) {
        return Ok(None);
    }
    let refuse = |why: String| {
        eprintln!("strobe: cannot replay {}: {why}", a.file.display());
        EXIT_CANNOT_START
    };
    if a.gdb.is_some() {
        match gdb::ptrace_check() {
            Ok(Some(warning)) => eprintln!("strobe: warning: {warning}"),
            Ok(None) => {}
            Err(e) => return Err(refuse(format!("--gdb: {e}"))),
        }
    }
    let Ok(rec) = strobe_recorder::Recording::open(&a.file) else {
        return Ok(None);
    };
    let ranks = rec.job().ranks;
    if let Some(r) = a.gdb.filter(|&r| r >= ranks) {
        return Err(refuse(format!(
            "--gdb {r}: rank {r} does not exist: the recording has {ranks} rank{} (0..={})",
            if ranks == 1 { "" } else { "s" },
            ranks.saturating_sub(1)
        )));
    }
    let hold =
        strobe_replayer::control::failure_slice(rec.job().outcome.as_deref(), rec.last_slice());
    let other_stop = a.until_slice.is_some() || !a.breaks.is_empty() || a.step;
    if hold.is_none() && !other_stop {
        // Decision: refused rather than run to the end without ever starting gdb.
        let outcome = rec
            .job()
            .outcome
            .clone()
            .unwrap_or_else(|| "no outcome".into());
        let flag = if a.gdb.is_some() {
            "--gdb"
        } else {
            "--hold-at-failure"
        };
        return Err(refuse(format!(
            "{flag}: the recorded job did not fail ({outcome}), so there is no failure to stop at; give a stop (--until-slice S, --break SPEC, --step)"
        )));
    }
    Ok(hold)
}

/// The replay options the command line asks for (not yet confirmed).
fn options(a: &ReplayArgs) -> ReplayOptions {
    let mut env = a.env.clone();
    for k in &a.pass_env {
        // A variable strobe does not have is passed as unset: nothing to pass.
        if let Some(v) = std::env::var_os(k) {
            env.push((k.clone(), v));
        }
    }
    ReplayOptions {
        recording: a.file.clone(),
        program: a.program.clone(),
        allow_different_binary: a.allow_different_binary,
        breaks: a.breaks.clone(),
        until_slice: a.until_slice,
        start_paused: a.step || a.tui,
        tag_output: a.tag_output,
        timeout: a.timeout,
        regenerate: a.record.clone(),
        output: None,
        args: (!a.args.is_empty()).then(|| a.args.clone()),
        cwd: a.cwd.clone(),
        env,
        confirmed: false,
        replace: a.force,
        attachable: a.control.is_some() || a.step || a.tui || holds_at_failure(a),
        nodes: a.nodes,
        transport: replay_transport(a),
    }
}

/// The transport this replay runs over, when known before it starts (across hosts with
/// `auto`, the Machine Manager decides later: not compared).
fn replay_transport(a: &ReplayArgs) -> Option<String> {
    use strobe_runtime::transport::select::TransportChoice;
    if !a.hosts.wanted() {
        return a.hosts.local_transport().ok().map(|t| t.to_string());
    }
    match a.hosts.transport {
        TransportChoice::Tcp | TransportChoice::Verbs => Some(a.hosts.transport.to_string()),
        TransportChoice::Auto | TransportChoice::Shm => None,
    }
}

/// Show the launch plan, then decide: `Ok(None)` to go on (`opts.confirmed` set if the
/// launch needed it), `Ok(Some(code))` to exit with `code` (`--dry-run`, refused).
fn confirm(a: &ReplayArgs, opts: &mut ReplayOptions) -> Result<Option<i32>> {
    let plan = match strobe_replayer::plan(opts) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("strobe: cannot replay {}: {e}", a.file.display());
            return Ok(Some(EXIT_CANNOT_START));
        }
    };
    if a.dry_run {
        print!("{}", plan.render());
        match plan.needs_confirmation() {
            Some(why) if !a.yes => {
                println!("would ask: {why} (confirm on the terminal or with --yes)")
            }
            _ => println!("would run: yes"),
        }
        return Ok(Some(0));
    }
    let Some(why) = plan.needs_confirmation() else {
        return Ok(None);
    };
    if a.yes {
        opts.confirmed = true;
        return Ok(None);
    }
    if !std::io::stdin().is_terminal() {
        eprintln!(
            "strobe: refusing to replay {}: {why}.\n{}strobe: stdin is not a terminal: pass --yes to run it (check with --dry-run)",
            a.file.display(),
            plan.render()
        );
        return Ok(Some(EXIT_CANNOT_START));
    }
    eprint!("strobe: {why}.\n{}Run this? [y/N] ", plan.render());
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    if matches!(line.trim(), "y" | "Y" | "yes" | "YES") {
        opts.confirmed = true;
        Ok(None)
    } else {
        eprintln!("strobe: not confirmed: nothing was run");
        Ok(Some(EXIT_CANNOT_START))
    }
}

/// `strobe replay FILE --tui`: the terminal UI on the replay (in-process, through the
/// control API: `strobe_tui::live`). The ranks' output goes to a file, the terminal
/// belongs to the UI; the verdict is printed once the terminal is back.
fn replay_tui(a: &ReplayArgs, mut opts: ReplayOptions) -> Result<i32> {
    // The replay moves the process to the recorded working directory: make paths absolute.
    opts.recording = std::path::absolute(&a.file)?;
    if let Some(p) = &opts.program {
        opts.program = Some(std::path::absolute(p)?);
    }
    if let Some(p) = &opts.regenerate {
        opts.regenerate = Some(std::path::absolute(p)?);
    }
    let output = match &a.output {
        Some(p) => std::path::absolute(p)?,
        // Never a predictable name in /tmp (issue 11, item 5: a planted symlink there was
        // followed): a fresh private directory, kept for the user to read afterwards.
        None => strobe_replayer::safety::private_dir()?.join("ranks.out"),
    };
    opts.output = Some(output.clone());
    match strobe_tui::run_live(opts, &gdb::template(a.gdb_command.as_deref())) {
        Ok(feed) => {
            if let Some(text) = &feed.report {
                eprint!("{text}");
                if !text.ends_with('\n') {
                    eprintln!();
                }
            }
            eprintln!("strobe: the ranks' output is in {}", output.display());
            Ok(feed.exit_code())
        }
        Err(strobe_tui::TuiError::Data(e)) => {
            eprintln!("strobe: cannot replay {}: {e}", a.file.display());
            Ok(EXIT_CANNOT_START)
        }
        Err(e) => Err(e.into()),
    }
}

/// The pause report and the `(strobe)` prompt, in one write to stderr (they came from two
/// threads and could land in either order, or between lines of program output). Decision
/// (docs/replay-control.md): the prompt goes to stderr, the program's output to stdout;
/// stdout is flushed first, and the ranks are held at MPI calls while the prompt waits.
fn prompt(paused: Option<&strobe_replayer::Pause>) {
    let _ = std::io::stdout().flush();
    let mut text = paused.map(|p| p.render()).unwrap_or_default();
    text.push_str("(strobe) ");
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    let _ = err.flush();
}

/// The terminal stepper: reads a command whenever the replay is held.
fn stepper(ctl: Arc<Controller>) {
    let stdin = std::io::stdin();
    let mut shown: Option<strobe_replayer::Pause> = None;
    loop {
        if ctl.wait_paused(Duration::from_secs(3600)).is_none() {
            if ctl.status().finished.is_some() {
                return;
            }
            continue;
        }
        // The report once per hold; commands that do not move (break, print) prompt again.
        let paused = ctl.status().paused;
        let fresh = paused.as_ref().filter(|p| shown.as_ref() != Some(*p));
        prompt(fresh);
        shown = paused;
        let mut line = String::new();
        match stdin.lock().read_line(&mut line) {
            Ok(0) | Err(_) => {
                // No more commands: let the replay run to its end.
                ctl.resume();
                return;
            }
            Ok(_) => {}
        }
        let mut words = line.split_whitespace();
        match (words.next(), words.next()) {
            (None, _) | (Some("n" | "next"), _) => ctl.step(),
            (Some("c" | "continue"), _) => ctl.resume(),
            (Some("r" | "run"), Some(n)) => match n.parse() {
                Ok(s) => ctl.run_to(s),
                Err(_) => eprintln!("run N: N is a slice number"),
            },
            (Some("p" | "print"), _) => {
                if let Some(p) = ctl.status().paused {
                    eprint!("{}", p.render());
                }
            }
            (Some("b" | "break"), Some(spec)) => match spec.parse::<Break>() {
                Ok(b) => match ctl.add_break(b.clone()) {
                    Ok(n) => eprintln!("breakpoint {n}: {b}"),
                    Err(e) => eprintln!("breakpoint {b} refused: {e}"),
                },
                Err(e) => eprintln!("{e}"),
            },
            (Some("b" | "break" | "i" | "info"), None) => {
                let breaks = ctl.breaks();
                if breaks.is_empty() {
                    eprintln!("no breakpoints (set one: break slice=S or break rank=R,call=MPI_Recv)");
                }
                for (i, b) in breaks.iter().enumerate() {
                    eprintln!("  {}  {b}", i + 1);
                }
            }
            (Some("d" | "delete"), Some(n)) => match n.parse::<usize>() {
                Ok(n) => match ctl.delete_break(n) {
                    Ok(b) => eprintln!("deleted breakpoint {n}: {b}"),
                    Err(e) => eprintln!("{e}"),
                },
                Err(_) => eprintln!("delete N: N is a breakpoint number (list them with break)"),
            },
            (Some("rs" | "reverse-step"), _) => travelled(ctl.reverse_step()),
            (Some("back"), n) => match n.map(str::parse::<u64>) {
                None => travelled(ctl.reverse_step()),
                Some(Ok(n)) => travelled(ctl.back(n, format!("back {n}"))),
                Some(Err(_)) => eprintln!("back N: N is a number of slices"),
            },
            (Some("g" | "goto"), Some(n)) => match n.parse::<u64>() {
                Ok(s) => travelled(ctl.goto(s, format!("goto {s}"))),
                Err(_) => eprintln!("goto S: S is a slice number"),
            },
            (Some("q" | "quit"), _) => {
                ctl.stop("stopped by the user".into());
                return;
            }
            _ => eprintln!(
                "commands: next (n, or empty), continue (c), run N (r N), goto S (g S), reverse-step (rs), back N, print (p), break SPEC (b SPEC), list breakpoints (b), delete N (d N), quit (q)"
            ),
        }
    }
}

/// What the stepper says after a time-travel command (the pause report follows once
/// every rank is held at the landing slice).
fn travelled(r: Result<strobe_replayer::Travel, String>) {
    match r {
        Ok(strobe_replayer::Travel::Here) => eprintln!("already held there"),
        Ok(strobe_replayer::Travel::Forward) => {}
        Ok(strobe_replayer::Travel::Back) => {
            eprintln!("strobe: going back: re-executing the job from the start (new pids)")
        }
        Err(e) => eprintln!("{e}"),
    }
}

/// `--until-slice` and `--break` checked against the recording before anything else
/// starts (the control socket announces itself on stderr): one line and exit 2 for a stop
/// that can never happen. The replayer checks again (the authority, also for `--tui`); a
/// file that cannot be read is left to it to report.
fn refuse_stops_that_never_fire(a: &ReplayArgs) -> Option<i32> {
    if a.until_slice.is_none() && a.breaks.is_empty() {
        return None;
    }
    let rec = strobe_recorder::Recording::open(&a.file).ok()?;
    let bounds = strobe_replayer::Bounds {
        ranks: rec.job().ranks,
        last_slice: rec.last_slice(),
    };
    let refused = a
        .until_slice
        .and_then(|s| {
            bounds
                .check_slice(s)
                .err()
                .map(|e| format!("--until-slice {s}: {e}"))
        })
        .or_else(|| {
            a.breaks
                .iter()
                .find_map(|b| bounds.check(b).err().map(|e| format!("--break {b}: {e}")))
        })?;
    eprintln!("strobe: cannot replay {}: {refused}", a.file.display());
    Some(EXIT_CANNOT_START)
}

/// A replay on node daemons runs straight through (decision: the daemons' gates do not
/// take the control API's holds, so stopping, stepping and debugger options are refused
/// with `--hosts`; replay such a recording on this host, where it replays the same).
fn refuse_on_daemons(a: &ReplayArgs) -> Option<i32> {
    if !a.hosts.wanted() {
        return None;
    }
    let flag = [
        (a.until_slice.is_some(), "--until-slice"),
        (!a.breaks.is_empty(), "--break"),
        (a.step, "--step"),
        (a.tui, "--tui"),
        (a.control.is_some(), "--control"),
        (holds_at_failure(a), "--hold-at-failure/--gdb"),
    ]
    .into_iter()
    .find_map(|(set, flag)| set.then_some(flag))?;
    eprintln!(
        "strobe: cannot replay {}: {flag} is for a replay on this host; across hosts a replay runs straight through (drop the host options to stop and step)",
        a.file.display()
    );
    Some(EXIT_CANNOT_START)
}

pub fn replay(a: &ReplayArgs) -> Result<i32> {
    if a.gdb_command.is_some() && a.gdb.is_none() && !a.tui {
        eprintln!("strobe: --gdb-command needs --gdb RANK or --tui (where x starts it)");
        return Ok(EXIT_CANNOT_START);
    }
    if let Some(n) = a.max_ranks {
        strobe_runtime::limits::allow_ranks(n);
    }
    // `--transport verbs` where verbs cannot work: refused before anything runs.
    if !a.hosts.wanted() {
        a.hosts.local_transport()?;
    }
    if let Some(rank) = a.rank {
        return replay_single(a, rank);
    }
    if let Some(out) = &a.record {
        let same = matches!(
            (std::fs::canonicalize(out), std::fs::canonicalize(&a.file)),
            (Ok(x), Ok(y)) if x == y
        );
        if same {
            // Checked here too, before --force could remove the recording itself.
            eprintln!(
                "strobe: cannot regenerate into the recording being replayed ({}): write a new file",
                out.display()
            );
            return Ok(EXIT_CANNOT_START);
        }
        if out.exists() && !a.force {
            eprintln!(
                "strobe: {} already exists (use --force to overwrite it)",
                out.display()
            );
            return Ok(EXIT_CANNOT_START);
        }
        // --force: the recorder replaces it (only a regular file no one is writing).
    }
    if a.program.is_some() && a.allow_different_binary {
        // Checked (and warned about) by the replayer.
    } else if a.allow_different_binary {
        bail!("--allow-different-binary only applies with --program");
    }
    if let Some(code) = refuse_on_daemons(a) {
        return Ok(code);
    }
    if let Some(code) = refuse_stops_that_never_fire(a) {
        return Ok(code);
    }
    let failure_hold = match check_failure_hold(a) {
        Ok(h) => h,
        Err(code) => return Ok(code),
    };
    let mut opts = options(a);
    if a.dry_run || a.tui {
        if let Some(code) = confirm(a, &mut opts)? {
            return Ok(code);
        }
    }
    if a.tui {
        return replay_tui(a, opts);
    }
    let ctl = Arc::new(Controller::new());
    if let Some((slice, why)) = failure_hold.clone() {
        ctl.hold_before(slice, why);
    }
    let stops = a.until_slice.is_some() || !a.breaks.is_empty() || a.step || failure_hold.is_some();
    // Without --control, a socket in a fresh private directory (never a predictable name
    // in /tmp, where a planted file could stop the replay).
    let started = match &a.control {
        Some(p) => Some(ControlServer::start(p, ctl.clone()).map_err(|e| (p.clone(), e))),
        None => stops.then(|| {
            ControlServer::start_private(ctl.clone()).map_err(|e| (std::env::temp_dir(), e))
        }),
    };
    let server = match started {
        Some(Ok(s)) => {
            eprintln!("strobe: replay control socket: {}", s.path().display());
            Some(s)
        }
        Some(Err((p, e))) => {
            eprintln!("strobe: cannot listen on {}: {e}", p.display());
            return Ok(EXIT_CANNOT_START);
        }
        None => None,
    };
    // Confirmed after the socket is up (nothing runs before): a client that connects as
    // soon as the socket appears must not miss the first pause, which the replay reaches
    // sooner now that the program's hash is memoized (safety::program_sha256).
    if let Some(code) = confirm(a, &mut opts)? {
        drop(server);
        return Ok(code);
    }
    // Pauses are announced on stderr (stdout belongs to the program).
    let events = ctl.subscribe();
    // A foreground gdb owns the terminal: no stepper reads it.
    let gdb_foreground = a.gdb.is_some() && std::env::var_os("TMUX").is_none_or(|t| t.is_empty());
    let terminal_stepper = !gdb_foreground && (a.step || (stops && std::io::stdin().is_terminal()));
    let mut debugger = a
        .gdb
        .map(|rank| (rank, gdb::template(a.gdb_command.as_deref()), ctl.clone()));
    std::thread::spawn(move || {
        for e in events {
            if let Event::Paused(p) = e {
                // The debugger starts at the first stop only (it stays attached after).
                if let Some((rank, template, ctl)) = debugger.take() {
                    if !terminal_stepper {
                        eprint!("{}", p.render());
                    }
                    if let Err(e) = gdb::start(&template, rank, &p) {
                        eprintln!("strobe: --gdb {rank}: {e:#}");
                    }
                    if gdb_foreground {
                        ctl.stop("gdb exited: the replay was ended".into());
                    }
                    continue;
                }
                if terminal_stepper {
                    // The stepper prints the report with its prompt.
                    continue;
                }
                eprint!("{}", p.render());
                if !terminal_stepper {
                    eprintln!(
                        "strobe: send {{\"cmd\":\"continue\"}} to the control socket to go on, or press Ctrl-C"
                    );
                }
            } else if let Event::Travelling { to } = e {
                // The stepper says it when the command is typed.
                if !terminal_stepper {
                    eprintln!(
                        "strobe: going back to slice {to}: re-executing the job from the start"
                    );
                }
            }
        }
    });
    if terminal_stepper {
        let c = ctl.clone();
        std::thread::spawn(move || stepper(c));
    }
    // A progress bar on a terminal for a replay that is not stopped on the way (a held
    // replay's terminal is the stepper's); its total is the recording's last slice.
    // The total is shown, never acted on: read without the whole-file checks (the replayer
    // runs them), and only for a terminal (the open cost a replay whose stderr is a file or
    // a pipe a full check of the recording, 3 ms for a small file and 150 ms for 18 MB).
    let shown = (!stops && std::io::stderr().is_terminal())
        .then(|| {
            let total = strobe_recorder::Recording::open_with(
                &a.file,
                strobe_recorder::recording::Check::UpTo(0),
            )
            .ok()
            .map(|r| r.last_slice());
            let c = ctl.clone();
            crate::progress::Progress::start(crate::progress::Work {
                verb: "replaying",
                file: None,
                total,
                current: Some(Box::new(move || c.status().slice)),
            })
        })
        .flatten();
    let runner = crate::multi_host::DaemonRunner { hosts: &a.hosts };
    let runner = a
        .hosts
        .wanted()
        .then_some(&runner as &dyn strobe_replayer::JobRunner);
    let res = strobe_replayer::replay_with(&opts, ctl, runner);
    drop(shown);
    drop(server);
    match res {
        Ok(r) => {
            for w in &r.warnings {
                eprintln!("strobe: {w}");
            }
            eprint!("{}", r.text);
            if !r.text.ends_with('\n') {
                eprintln!();
            }
            if !a.no_checks {
                crate::print_checks(&r.checks);
            }
            if let Some(out) = &a.record {
                eprintln!(
                    "strobe: wrote the regenerated recording {} ({} slices)",
                    out.display(),
                    r.slices
                );
            }
            Ok(r.exit_code())
        }
        Err(e) => {
            eprintln!("strobe: cannot replay {}: {e}", a.file.display());
            Ok(EXIT_CANNOT_START)
        }
    }
}

/// `strobe replay FILE --rank R`: rank R alone, fed from its captured payloads.
fn replay_single(a: &ReplayArgs, rank: u32) -> Result<i32> {
    let mut opts = options(a);
    let debugger: Option<strobe_runtime::alone::Debugger> = match a.gdb {
        Some(g) if g != rank => {
            eprintln!(
                "strobe: cannot replay {}: --gdb {g} with --rank {rank}: only rank {rank} runs (give --gdb {rank})",
                a.file.display()
            );
            return Ok(EXIT_CANNOT_START);
        }
        Some(_) => {
            if let Err(e) = gdb::ptrace_check() {
                eprintln!("strobe: cannot replay {}: --gdb: {e}", a.file.display());
                return Ok(EXIT_CANNOT_START);
            }
            opts.attachable = true;
            let template = gdb::template(a.gdb_command.as_deref());
            Some(Box::new(move |pid| {
                if let Err(e) = gdb::start_pid(&template, rank, pid) {
                    eprintln!("strobe: --gdb {rank}: {e:#}");
                }
            }))
        }
        None => None,
    };
    if let Some(code) = confirm(a, &mut opts)? {
        return Ok(code);
    }
    match strobe_replayer::replay_rank(&opts, rank, debugger) {
        Ok(r) => {
            for w in &r.warnings {
                eprintln!("strobe: {w}");
            }
            eprint!("{}", r.text);
            if !r.text.ends_with('\n') {
                eprintln!();
            }
            Ok(r.exit_code())
        }
        Err(e) => {
            eprintln!("strobe: cannot replay {}: {e}", a.file.display());
            Ok(EXIT_CANNOT_START)
        }
    }
}
