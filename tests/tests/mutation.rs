//! The mutation corpus (issue 11): damaged copies of real recordings, made
//! deterministically from a seed — byte flips, truncations, zeroed pages, and SQL tampering
//! of the columns of `job`, `slice` and `replay_log` (negative, huge, wrong type, unknown
//! names, NULL, deleted rows) — each given to `strobe stats`, `strobe stats --json`,
//! `strobe replay` and the terminal UI (its real drawing code on a `TestBackend`).
//!
//! What must never happen: a panic (exit 101, "panicked"), a hang (the timeout), an
//! impossible value printed ("-1 ranks", "0 nodes", an outcome strobe never writes), or
//! damage called a divergence where strobe can tell it is damage. What is allowed: exit 2
//! with "damaged recording" (or "not a strobe recording"), or a normal result when the
//! damage was harmless (a metrics column, free pages).
//!
//! Damage that validation cannot tell from another run (a byte flip inside a slice digest
//! or an outcome of the replay log, a changed `job.message`, a deleted last chunk of an
//! outcome stream, a lowered `job.deadlock_slices`) is refused by the content checksum
//! (`recorder/src/checksum.rs`): every divergence for damage fails the test, and SQL
//! tampering also edits the digests and the checksum row itself. `docs/reliability.md`
//! has the table of the big run.
//!
//! The terminal UI runs twice: its drawing code on a `TestBackend` (every mutant), and the
//! real `strobe tui` in a tmux pane (`mutation/tmux.rs`; the first `STROBE_MUTATION_TMUX`
//! mutants, 20 in CI).
//!
//! CI runs 150 mutants; `scripts/mutation-corpus.sh` runs thousands
//! (`STROBE_MUTANTS=N`, `STROBE_MUTATION_TABLE=FILE` for the table).

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use strobe_tests::{fixture, strobe};

#[path = "mutation/tmux.rs"]
mod tmux;

/// A small deterministic generator (xorshift64*): the same seed, the same corpus.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
}

const JOB_COLUMNS: &[&str] = &[
    "format_version",
    "strobe_version",
    "command",
    "cwd",
    "program",
    "env",
    "ranks",
    "nodes",
    "slice_ns",
    "policy",
    "deadlock_slices",
    "chunk_budget",
    "direct_copy_min",
    "schedule_log",
    "metrics",
    "started_at",
    "ended_at",
    "elapsed_ns",
    "outcome",
    "message",
    "exit_status",
    "total_slices",
    "scheduler_version",
];
/// Every column (the digest too: the content checksum covers it).
const SLICE_COLUMNS: &[&str] = &[
    "slice",
    "reason",
    "start_ns",
    "getts_ns",
    "gtdem_ns",
    "gtmsm_ns",
    "gtts_ns",
    "n_descriptors",
    "n_matches",
    "n_chunks",
    "n_collectives",
    "n_completions",
    "n_blocked",
    "digest",
];
/// The checksum row (recorder/src/checksum.rs).
const CHECKSUM_COLUMNS: &[&str] = &["algorithm", "covers", "digest"];
const LOG_COLUMNS: &[&str] = &["stream", "rank", "chunk", "last_slice", "data"];
/// The per-process statistics `stats` prints.
const MMDS_COLUMNS: &[&str] = &["rank", "wall_ns", "compute_ns", "comm_ns", "calls"];
const VALUES: &[&str] = &[
    "-1",
    "0",
    "4611686018427387904",
    "-9223372036854775808",
    "100000",
    "'garbage'",
    "'exploded'",
    "NULL",
    "x'00ff'",
    "1e308",
    "''",
    "'[\"/bin/sh\",\"-c\",\"id\"]'",
    "'{\"STROBE_JOB_FD\":\"0\"}'",
];

/// One damaged copy: how it was made, and the file.
struct Mutant {
    kind: &'static str,
    what: String,
    path: PathBuf,
}

fn mutate(rng: &mut Rng, src: &Path, dst: &Path) -> Option<(&'static str, String)> {
    std::fs::copy(src, dst).unwrap();
    let mut bytes = std::fs::read(dst).unwrap();
    let len = bytes.len() as u64;
    match rng.below(10) {
        0 | 1 => {
            let n = 1 + rng.below(8);
            let mut at = Vec::new();
            for _ in 0..n {
                let i = rng.below(len) as usize;
                bytes[i] ^= 1 << rng.below(8);
                at.push(i);
            }
            std::fs::write(dst, &bytes).unwrap();
            Some(("byte flip", format!("bits at {at:?}")))
        }
        2 => {
            let cut = rng.below(len);
            bytes.truncate(cut as usize);
            std::fs::write(dst, &bytes).unwrap();
            Some(("truncation", format!("to {cut} bytes")))
        }
        3 => {
            let pages = (len / 4096).max(1);
            let p = rng.below(pages) as usize;
            let end = ((p + 1) * 4096).min(bytes.len());
            bytes[p * 4096..end].fill(0);
            std::fs::write(dst, &bytes).unwrap();
            Some(("zeroed page", format!("page {}", p + 1)))
        }
        k => {
            let c = Connection::open(dst).unwrap();
            let (table, cols) = match k {
                4 | 5 => ("job", JOB_COLUMNS),
                6 => ("slice", SLICE_COLUMNS),
                7 => ("replay_log", LOG_COLUMNS),
                8 => ("mmds_rank", MMDS_COLUMNS),
                _ => ("content_checksum", CHECKSUM_COLUMNS),
            };
            // `replay_log` has no rowid: its rows are addressed by their key.
            let key = |t: &str| {
                if t == "replay_log" {
                    "(stream, rank, chunk)"
                } else {
                    "rowid"
                }
            };
            let n: i64 = c
                .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
                .unwrap_or(1);
            let sql = if table == "replay_log" && rng.below(4) == 0 {
                match rng.below(3) {
                    0 => "DELETE FROM replay_log".to_string(),
                    k => {
                        // One chunk: at random, or the last of a stream (which the chunk
                        // numbering cannot miss). Named by its key, so the verdict can tell
                        // the streams apart (see `judge_replay`).
                        let sql = if k == 1 {
                            format!(
                                "SELECT stream, rank, chunk FROM replay_log LIMIT 1 OFFSET {}",
                                rng.below(n.max(1) as u64)
                            )
                        } else {
                            format!(
                                "SELECT stream, rank, max(chunk) FROM replay_log
                                 GROUP BY stream, rank LIMIT 1 OFFSET {}",
                                rng.below(12)
                            )
                        };
                        let (s, r, ch): (i64, i64, i64) = c
                            .query_row(&sql, [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                            .ok()?;
                        format!(
                            "DELETE FROM replay_log WHERE stream = {s} AND rank = {r} AND chunk = {ch}"
                        )
                    }
                }
            } else {
                let col = rng.pick(cols);
                let val = rng.pick(VALUES);
                let scope = if table == "job" {
                    String::new()
                } else {
                    let k = key(table);
                    format!(
                        " WHERE {k} IN (SELECT {k} FROM {table} LIMIT 1 OFFSET {})",
                        rng.below(n.max(1) as u64)
                    )
                };
                format!("UPDATE {table} SET \"{col}\" = {val}{scope}")
            };
            // A NOT NULL or a key constraint may refuse the change: no mutant then.
            c.execute_batch(&sql).ok()?;
            Some(("SQL tampering", sql))
        }
    }
}

/// How one command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Verdict {
    /// A normal result (the damage was harmless).
    Ok,
    /// Exit 2 with "damaged recording" / "not a strobe recording" / a refusal.
    Refused,
    Panic,
    Hang,
    Impossible,
    /// "diverged" for damage strobe can see.
    DamageAsDivergence,
    /// Any other exit status.
    Other,
}

impl Verdict {
    fn bad(self) -> bool {
        self >= Verdict::Panic
    }
}

struct Ran {
    code: Option<i32>,
    out: String,
    err: String,
}

fn run(args: &[&str], timeout: Duration) -> Ran {
    let mut child = Command::new(strobe())
        .args(args)
        .env_remove("STROBE_SCHEDULE_LOG")
        .env_remove("STROBE_METRICS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn strobe");
    let (mut so, mut se) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = so.read_to_string(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = se.read_to_string(&mut s);
        s
    });
    let t = Instant::now();
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code();
        }
        if t.elapsed() > timeout {
            // The replay's ranks die with it (PR_SET_PDEATHSIG).
            let _ = child.kill();
            let _ = child.wait();
            return Ran {
                code: None,
                out: String::new(),
                err: "TIMEOUT".into(),
            };
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ran {
        code,
        out: t_out.join().unwrap(),
        err: t_err.join().unwrap(),
    }
}

const OUTCOMES: &[&str] = &[
    "success",
    "rank_failed",
    "deadlock",
    "livelock",
    "interrupted",
    "timeout",
    "engine_failed",
    "stopped",
    "not_started",
];

/// How `strobe stats` words a stored outcome (src/stats.rs, `outcome_words`).
fn outcome_words(o: &str) -> &str {
    match o {
        "rank_failed" => "a rank failed",
        "engine_failed" => "runtime failure",
        "stopped" => "stopped by the replay",
        other => other,
    }
}

fn refused(r: &Ran) -> bool {
    r.code == Some(2)
        && (r.err.contains("damaged recording")
            || r.err.contains("not a strobe recording")
            || r.err.contains("a recording is a regular file")
            || r.err.contains("newer strobe"))
}

fn panicked(r: &Ran) -> bool {
    r.code == Some(101) || r.err.contains("panicked")
}

/// Impossible figures in `strobe stats` text.
fn impossible_text(out: &str) -> Option<String> {
    for l in out.lines() {
        if let Some(rest) = l.strip_prefix("job        ") {
            let mut w = rest.split_whitespace();
            let ranks: i64 = w.next()?.parse().ok()?;
            let nodes: i64 = w.nth(1)?.parse().ok()?;
            if ranks < 1 || nodes < 1 || nodes > ranks {
                return Some(l.to_string());
            }
        }
        if let Some(rest) = l.strip_prefix("outcome    ") {
            let known = OUTCOMES
                .iter()
                .any(|o| rest.starts_with(&format!("{} (", outcome_words(o))));
            if !rest.starts_with("unknown:") && !known {
                return Some(l.to_string());
            }
        }
        if l.contains(" -1 ") || l.contains("(-") {
            return Some(l.to_string());
        }
    }
    None
}

fn impossible_json(out: &str) -> Option<String> {
    let j: serde_json::Value = match serde_json::from_str(out) {
        Ok(j) => j,
        Err(e) => return Some(format!("not JSON: {e}")),
    };
    let ranks = j["ranks"].as_i64().unwrap_or(-1);
    let nodes = j["nodes"].as_i64().unwrap_or(-1);
    if ranks < 1 || nodes < 1 || nodes > ranks {
        return Some(format!("{ranks} ranks, {nodes} nodes"));
    }
    if let Some(o) = j["outcome"].as_str() {
        if !OUTCOMES.contains(&o) {
            return Some(format!("outcome {o}"));
        }
    }
    for k in ["total_slices", "recorded_slices", "elapsed_ns"] {
        if j[k].as_i64().is_some_and(|v| v < 0) {
            return Some(format!("{k} {}", j[k]));
        }
    }
    None
}

fn judge_stats(r: &Ran, json: bool) -> (Verdict, String) {
    if r.code.is_none() {
        return (Verdict::Hang, String::new());
    }
    if panicked(r) {
        return (Verdict::Panic, r.err.clone());
    }
    if refused(r) {
        return (Verdict::Refused, String::new());
    }
    // 0, or 2 with the accuracy warning (a tampered metrics value).
    if r.code == Some(0) || (r.code == Some(2) && r.err.contains("0.01%")) {
        let bad = if json {
            impossible_json(&r.out)
        } else {
            impossible_text(&r.out)
        };
        return match bad {
            Some(b) => (Verdict::Impossible, b),
            None => (Verdict::Ok, String::new()),
        };
    }
    (Verdict::Other, format!("exit {:?}: {}", r.code, r.err))
}

fn judge_replay(r: &Ran, kind: &str) -> (Verdict, String) {
    if r.code.is_none() {
        return (Verdict::Hang, String::new());
    }
    if panicked(r) {
        return (Verdict::Panic, r.err.clone());
    }
    if refused(r) || r.code == Some(0) {
        return (
            if r.code == Some(0) {
                Verdict::Ok
            } else {
                Verdict::Refused
            },
            String::new(),
        );
    }
    if r.code == Some(1) {
        // Whatever the damage: what validation cannot see, the content checksum does.
        return (
            Verdict::DamageAsDivergence,
            format!("{kind}: {}", first_lines(&r.err)),
        );
    }
    if r.code == Some(2) {
        // Refusals that are not about damage (the recorded cwd or program gone, ...).
        return (Verdict::Refused, String::new());
    }
    (Verdict::Other, format!("exit {:?}: {}", r.code, r.err))
}

fn first_lines(s: &str) -> String {
    s.lines().take(3).collect::<Vec<_>>().join(" | ")
}

/// The terminal UI on a damaged file: open it and draw every view, in a thread (a hang
/// is a timeout, a panic is caught).
fn tui(path: &Path, timeout: Duration) -> (Verdict, String) {
    let (tx, rx) = mpsc::channel();
    let p = path.to_path_buf();
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(move || tui_draw(&p));
        let _ = tx.send(r);
    });
    match rx.recv_timeout(timeout) {
        Err(_) => (Verdict::Hang, String::new()),
        Ok(Err(_)) => (Verdict::Panic, "the terminal UI panicked".into()),
        Ok(Ok(Err(e))) if e.contains("damaged") || e.contains("not a strobe") => {
            (Verdict::Refused, String::new())
        }
        Ok(Ok(Err(e))) => (Verdict::Ok, e),
        Ok(Ok(Ok(screen))) => match impossible_screen(&screen) {
            Some(b) => (Verdict::Impossible, b),
            None => (Verdict::Ok, String::new()),
        },
    }
}

fn tui_draw(path: &Path) -> Result<String, String> {
    use strobe_tui::app::Event;
    use strobe_tui::ratatui::backend::TestBackend;
    use strobe_tui::ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use strobe_tui::ratatui::Terminal;
    use strobe_tui::terminal::draw;
    use strobe_tui::{App, Theme};
    let rec = strobe_tui::data::open(path).map_err(|e| e.to_string())?;
    let mut app = App::new(rec, Theme { color: false });
    let mut term = Terminal::new(TestBackend::new(120, 40)).unwrap();
    let mut screens = String::new();
    for key in ['1', ']', '2', '3', '4', 'j', 'l'] {
        draw(&mut term, &mut app).map_err(|e| e.to_string())?;
        let buf = term.backend().buffer();
        for y in 0..buf.area.height {
            for x in 0..buf.area.width {
                screens.push_str(buf[(x, y)].symbol());
            }
            screens.push('\n');
        }
        app.handle(Event::Key(KeyEvent::new(
            KeyCode::Char(key),
            KeyModifiers::NONE,
        )));
    }
    Ok(screens)
}

fn impossible_screen(s: &str) -> Option<String> {
    for bad in [
        "-1 ranks",
        " 0 nodes",
        "-1 slices",
        "outcome exploded",
        "outcome garbage",
    ] {
        if s.contains(bad) {
            return Some(bad.to_string());
        }
    }
    None
}

/// Record the corpus's sources: three fixtures, three outcomes.
fn sources(dir: &Path) -> Vec<PathBuf> {
    sources_of(
        dir,
        &[("token_ring", "4"), ("deadlock", "2"), ("heisenbug", "3")],
    )
}

fn sources_of(dir: &Path, which: &[(&str, &str)]) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for &(name, n) in which {
        let db = dir.join(format!("{name}.db"));
        let o = Command::new(strobe())
            .args(["record", "-o"])
            .arg(&db)
            .args(["--force", "-n", n, "--timeout", "60s", "--"])
            .arg(fixture(name))
            .env_remove("STROBE_SCHEDULE_LOG")
            .env_remove("STROBE_METRICS")
            .stdout(Stdio::null())
            .output()
            .expect("spawn strobe record");
        assert!(
            db.exists(),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        // The undamaged file must read and replay, or the corpus proves nothing.
        let f = db.display().to_string();
        let st = run(&["stats", &f], Duration::from_secs(60));
        assert_eq!(st.code, Some(0), "stats {name}: {}", st.err);
        let r = run(&["replay", &f, "--timeout", "60s"], Duration::from_secs(90));
        assert_eq!(r.code, Some(0), "replay {name}: {}", r.err);
        v.push(db);
    }
    v
}

type Table = BTreeMap<(&'static str, &'static str, Verdict), u64>;

#[test]
fn damaged_recordings_never_panic_hang_lie_or_diverge() {
    let n: u64 = std::env::var("STROBE_MUTANTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150);
    let seed: u64 = std::env::var("STROBE_MUTATION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_0011);
    let in_tmux: u64 = std::env::var("STROBE_MUTATION_TMUX")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let mut server = (in_tmux > 0).then(tmux::Server::new);
    let dir = tempfile::tempdir().unwrap();
    let srcs = sources(dir.path());
    if let Some(server) = server.as_mut() {
        // The undamaged files go through every tab and quit cleanly, or the tmux runs
        // prove nothing.
        for src in &srcs {
            let v = server.tui(&strobe(), src, dir.path(), Duration::from_secs(60));
            assert_eq!(
                v.0,
                Verdict::Ok,
                "tui in tmux on {}: {}",
                src.display(),
                v.1
            );
        }
    }
    let mut rng = Rng(seed | 1);
    let mut table = Table::new();
    let mut failures = Vec::new();
    let mut made = 0u64;
    let t0 = Instant::now();
    while made < n {
        let src = &srcs[(made % srcs.len() as u64) as usize];
        let path = dir.path().join(format!("m{made}.db"));
        let Some((kind, what)) = mutate(&mut rng, src, &path) else {
            continue;
        };
        let m = Mutant { kind, what, path };
        let pane = server.as_mut().filter(|_| made < in_tmux);
        check(&m, pane, dir.path(), &mut table, &mut failures);
        std::fs::remove_file(&m.path).ok();
        made += 1;
    }
    let text = render(&table, made, made.min(in_tmux), t0.elapsed());
    eprintln!("{text}");
    if let Ok(out) = std::env::var("STROBE_MUTATION_TABLE") {
        std::fs::write(out, &text).unwrap();
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn check(
    m: &Mutant,
    pane: Option<&mut tmux::Server>,
    scratch: &Path,
    table: &mut Table,
    failures: &mut Vec<String>,
) {
    let f = m.path.display().to_string();
    let limit = Duration::from_secs(30);
    let mut verdicts = vec![
        ("stats", judge_stats(&run(&["stats", &f], limit), false)),
        (
            "stats --json",
            judge_stats(&run(&["stats", &f, "--json"], limit), true),
        ),
    ];
    let r = run(&["replay", &f, "--timeout", "20s"], limit);
    verdicts.push(("replay", judge_replay(&r, m.kind)));
    verdicts.push(("tui", tui(&m.path, limit)));
    if let Some(server) = pane {
        verdicts.push((
            "tui in tmux",
            server.tui(&strobe(), &m.path, scratch, limit),
        ));
    }
    for (cmd, (v, why)) in verdicts {
        *table.entry((m.kind, cmd, v)).or_default() += 1;
        if v.bad() {
            failures.push(format!("{cmd} on {} ({}): {v:?} {why}", m.kind, m.what));
        }
    }
}

fn render(t: &Table, n: u64, in_tmux: u64, took: Duration) -> String {
    use std::fmt::Write as _;
    let cols = [
        Verdict::Ok,
        Verdict::Refused,
        Verdict::Panic,
        Verdict::Hang,
        Verdict::Impossible,
        Verdict::DamageAsDivergence,
        Verdict::Other,
    ];
    let mut o = format!(
        "{n} mutants x 5 runs (stats, stats --json, replay, tui on a TestBackend; tui in tmux for {in_tmux} of them) in {:.0} s\n\n| damage | command | ok (harmless) | exit 2 damaged | panic | hang | impossible value | damage as divergence | other |\n|---|---|---|---|---|---|---|---|---|\n",
        took.as_secs_f64()
    );
    let kinds = ["byte flip", "truncation", "zeroed page", "SQL tampering"];
    for k in kinds {
        for c in ["stats", "stats --json", "replay", "tui", "tui in tmux"] {
            let _ = write!(o, "| {k} | {c} |");
            for v in cols {
                let _ = write!(o, " {} |", t.get(&(k, c, v)).copied().unwrap_or(0));
            }
            o.push('\n');
        }
    }
    o
}

/// The file's job row changed by `sql`; every command must say "damaged recording" with
/// exit 2 and print nothing of it (issue 11 items 10 and 11).
fn assert_damage_everywhere(sql: &str, want: &str) {
    assert_damage("token_ring", sql, want, true)
}

/// As [`assert_damage_everywhere`]; `tui`: whether the terminal UI must refuse it too (it
/// does not read the replay log, so damage only there is replay's and stats' business).
fn assert_damage(fixture: &str, sql: &str, want: &str, tui: bool) {
    assert_damage_with(fixture, sql, want, tui, false)
}

/// As [`assert_damage`], with the content checksum recomputed after the edit: the checks
/// behind the checksum (the replay log's own) must hold for files without one (older
/// formats, a recording cut by a crash) or whose checksum was forged.
fn assert_damage_resealed(fixture: &str, sql: &str, want: &str, tui: bool) {
    assert_damage_with(fixture, sql, want, tui, true)
}

fn assert_damage_with(fixture: &str, sql: &str, want: &str, tui: bool, reseal: bool) {
    let dir = tempfile::tempdir().unwrap();
    let srcs = sources_of(dir.path(), &[(fixture, "2")]);
    let db = &srcs[0];
    let c = Connection::open(db).unwrap();
    c.execute_batch(sql).unwrap();
    if reseal {
        strobe_recorder::checksum::seal(&c).unwrap();
    }
    drop(c);
    let f = db.display().to_string();
    for args in [
        vec!["stats", f.as_str()],
        vec!["stats", f.as_str(), "--json"],
        vec!["replay", f.as_str(), "--timeout", "20s"],
    ] {
        let r = run(&args, Duration::from_secs(30));
        assert_eq!(r.code, Some(2), "{args:?} after {sql}: {}", r.err);
        assert!(
            r.err.contains("damaged recording") && r.err.contains(want),
            "{args:?} after {sql}: {}",
            r.err
        );
        assert!(r.out.is_empty(), "{args:?} printed {}", r.out);
        assert!(!r.err.contains("DIVERGED"), "{}", r.err);
    }
    match strobe_tui::data::open(db) {
        Err(e) => assert!(e.to_string().contains("damaged recording"), "{e}"),
        Ok(_) if !tui => {}
        Ok(_) => panic!("the terminal UI opened a damaged recording ({sql})"),
    }
}

#[test]
fn impossible_job_values_are_damage_not_figures() {
    for (sql, want) in [
        ("UPDATE job SET ranks = -1", "ranks"),
        ("UPDATE job SET ranks = 0", "job.ranks is 0"),
        ("UPDATE job SET nodes = 0", "job.nodes is 0"),
        ("UPDATE job SET nodes = 3", "job.nodes is 3"),
        ("UPDATE job SET outcome = 'exploded'", "exploded"),
        ("UPDATE job SET total_slices = -1", "total_slices"),
        ("UPDATE job SET policy = 'sometimes'", "policy"),
        ("UPDATE job SET slice_ns = 0", "slice_ns"),
        (
            "UPDATE slice SET n_descriptors = -1 WHERE slice = 2",
            "slice",
        ),
        ("UPDATE slice SET reason = 'whim' WHERE slice = 2", "slice"),
    ] {
        assert_damage_everywhere(sql, want);
    }
}

#[test]
fn damage_the_replay_would_have_called_a_divergence_is_damage() {
    for (sql, want) in [
        ("UPDATE job SET chunk_budget = 0", "chunk_budget"),
        (
            "UPDATE job SET env = '{\"STROBE_JOB_FD\":\"0\"}'",
            "STROBE_JOB_FD",
        ),
    ] {
        assert_damage_everywhere(sql, want);
    }
    for sql in [
        "DELETE FROM replay_log",
        "DELETE FROM replay_log WHERE stream = 0 AND rank = 1",
        "DELETE FROM replay_log WHERE stream = 0 AND rank = 1 AND chunk =
            (SELECT max(chunk) FROM replay_log WHERE stream = 0 AND rank = 1)",
    ] {
        assert_damage_resealed("token_ring", sql, "replay log", false);
    }
    // An outcome naming more requests than a call can pass: the replaying rank used to
    // stop "diverged" on it ("the recording is damaged"), exit 1; a program that never
    // reached it replayed as matched.
    let mut token = Vec::new();
    let mut v: u64 = ((1 << 24) + 1) << 2 | 1;
    while v >= 0x80 {
        token.push(v as u8 | 0x80);
        v >>= 7;
    }
    token.push(v as u8);
    let hex: String = token.iter().map(|b| format!("{b:02x}")).collect();
    assert_damage_resealed(
        "token_ring",
        &format!(
            "INSERT INTO replay_log VALUES (1, 0,
               (SELECT count(*) FROM replay_log WHERE stream = 1 AND rank = 0), 1, x'{hex}')"
        ),
        "bad outcome token",
        false,
    );
    // Found by the big corpus run: a job row that disagrees with the rest of the file made
    // replay spawn 100000 ranks (a hang), or diverge where the recorded job "went on".
    assert_damage_everywhere("UPDATE job SET ranks = 100000", "rank table has 2");
    assert_damage_everywhere("UPDATE job SET outcome = NULL", "outcome is missing");
    assert_damage(
        "deadlock",
        "UPDATE job SET deadlock_slices = 100000",
        "deadlock_slices",
        true,
    );
}

/// The damage the big corpus run still saw replayed as a divergence before the content
/// checksum: values that are each well formed, but another run's. Now damage everywhere,
/// the terminal UI included.
#[test]
fn damage_only_the_content_checksum_sees_is_damage() {
    for (fixture, sql) in [
        (
            "deadlock",
            "UPDATE job SET message = message || ' (edited)'",
        ),
        (
            "deadlock",
            "UPDATE job SET deadlock_slices = deadlock_slices - 1",
        ),
        (
            "token_ring",
            "UPDATE slice SET digest = digest + 1 WHERE slice = (SELECT max(slice) FROM slice)",
        ),
        (
            "token_ring",
            "DELETE FROM replay_log WHERE (stream, rank, chunk) =
               (SELECT stream, rank, max(chunk) FROM replay_log WHERE stream > 0
                GROUP BY stream, rank LIMIT 1)",
        ),
        ("token_ring", "UPDATE rank SET exit_code = 1 WHERE rank = 1"),
    ] {
        assert_damage(fixture, sql, "content checksum does not match", true);
    }
}

/// A FIFO, a directory or a device given as the recording is refused at once (issue 11
/// item 9: `open()` of a FIFO used to block for ever).
#[test]
fn a_fifo_a_directory_or_a_device_is_refused_without_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.db");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo touches nothing else.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let sub = dir.path().join("sub.db");
    std::fs::create_dir(&sub).unwrap();
    for p in [fifo.as_path(), sub.as_path(), Path::new("/dev/zero")] {
        let f = p.display().to_string();
        for args in [
            vec!["stats", f.as_str()],
            vec!["stats", f.as_str(), "--json"],
            vec!["replay", f.as_str()],
            // The file is checked before the terminal: no tty needed to see the refusal.
            vec!["tui", f.as_str()],
        ] {
            let t = Instant::now();
            let r = run(&args, Duration::from_secs(10));
            assert_eq!(r.code, Some(2), "{args:?}: {}", r.err);
            assert!(r.err.contains("regular file"), "{args:?}: {}", r.err);
            assert!(t.elapsed() < Duration::from_secs(5));
        }
        let e = strobe_tui::data::open(p).err().expect("opened");
        assert!(e.to_string().contains("regular file"), "{e}");
    }
}
