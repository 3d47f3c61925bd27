//! Jobs on node daemons (`strobe node`) started by the Machine Manager (`strobe run
//! --hosts ... | --launcher local`): output forwarding, exit reports, faults (a daemon
//! killed, a host's link down), the program's checksum, and a client without the job
//! secret. The across-hosts part runs on `scripts/hosts.sh` test hosts (their own network,
//! PID, UTS and mount namespaces) and needs root (CI runs as root); without it, it says so
//! and skips. Instance ids 170..179 are this file's (hosts.rs draws its own from 100..199
//! by pid).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use strobe_tests::{fixture, strobe, Run};

fn hosts_sh() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/hosts.sh")
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn output_of(out: Output, t: Instant) -> Run {
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: t.elapsed(),
    }
}

/// `strobe run <args> --timeout 120s -- <program> <program args>`.
fn run(args: &[&str], program: &Path, program_args: &[&str]) -> Run {
    let t = Instant::now();
    let out = Command::new(strobe())
        .arg("run")
        .args(args)
        .args(["--timeout", "120s", "--"])
        .arg(program)
        .args(program_args)
        .output()
        .expect("spawn strobe");
    output_of(out, t)
}

fn sorted_lines(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s.lines().map(str::to_string).collect();
    v.sort();
    v
}

// ---- on this host: local daemons --------------------------------------------------------

#[test]
fn local_daemon_runs_a_job_with_tagged_output() {
    let r = run(
        &[
            "--launcher",
            "local",
            "--nodes",
            "1",
            "-n",
            "3",
            "--tag-output",
        ],
        &fixture("hello"),
        &[],
    );
    r.assert_ok("hello on a local daemon");
    assert_eq!(
        sorted_lines(&r.stdout),
        (0..3)
            .map(|i| format!("[{i}] hello from rank {i} of 3"))
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_failing_rank_is_reported_as_on_one_host() {
    let one_host = run(&["-n", "2"], &fixture("crash"), &[]);
    let daemons = run(
        &["--launcher", "local", "--nodes", "1", "-n", "2"],
        &fixture("crash"),
        &[],
    );
    assert_eq!(one_host.code, 128 + libc::SIGABRT, "{}", one_host.stderr);
    assert_eq!(daemons.code, one_host.code, "{}", daemons.stderr);
    assert!(
        daemons.stderr.contains("rank 1 (pid ") && daemons.stderr.contains("SIGABRT"),
        "{}",
        daemons.stderr
    );
}

#[test]
fn three_local_daemons_run_a_job() {
    let r = run(
        &[
            "--launcher",
            "local",
            "--nodes",
            "3",
            "-n",
            "6",
            "--tag-output",
        ],
        &fixture("hello"),
        &[],
    );
    r.assert_ok("hello on 3 local daemons");
    assert_eq!(
        sorted_lines(&r.stdout),
        (0..6)
            .map(|i| format!("[{i}] hello from rank {i} of 6"))
            .collect::<Vec<_>>()
    );
}

/// What `strobe run` reads on its stdin reaches rank 0, wherever it runs (here node 0 of
/// two daemons), and its end too: the rank reads to EOF and the job ends.
#[test]
fn rank_0_reads_the_machine_managers_stdin() {
    use std::io::Write;
    let t = Instant::now();
    let mut child = Command::new(strobe())
        .args(["run", "--launcher", "local", "--nodes", "2", "-n", "4"])
        .args(["--timeout", "120s", "--"])
        .arg(fixture("where"))
        .arg("stdin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn strobe");
    let mut input = child.stdin.take().unwrap();
    input.write_all(b"alpha\nbeta\n").unwrap();
    drop(input);
    let r = finish(child, t);
    r.assert_ok("where stdin");
    let lines = sorted_lines(&r.stdout);
    assert!(
        lines.contains(&"rank 0 read: alpha".to_string())
            && lines.contains(&"rank 0 read: beta".to_string()),
        "{}",
        r.stdout
    );
    assert_eq!(lines.len(), 6, "{}", r.stdout);
}

/// A deadlock across three daemons is found by node 0's engine (the other nodes' ranks
/// reach it through the slot mirror) and reported as on one host, exit 3; a crash on the
/// last node is the job's failure, with the one-host status and message.
#[test]
fn three_local_daemons_report_a_deadlock_and_a_crash_as_one_host_does() {
    let args = ["--launcher", "local", "--nodes", "3", "-n", "6"];
    let r = run(&args, &fixture("deadlock"), &[]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr.contains("strobe: deadlock in slice")
            && r.stderr.contains("rank 5 blocked in MPI_Recv(source=0")
            && r.stderr.contains(
                "wait-for cycle: rank 0 -> rank 1 -> rank 2 -> rank 3 -> rank 4 -> rank 5 -> rank 0"
            ),
        "{}",
        r.stderr
    );
    let r = run(&args, &fixture("crash"), &[]);
    assert_eq!(r.code, 128 + libc::SIGABRT, "{}", r.stderr);
    assert!(
        r.stderr.contains("rank 5 (pid ") && r.stderr.contains("was killed by SIGABRT"),
        "{}",
        r.stderr
    );
}

#[test]
fn three_local_daemons_run_token_ring() {
    let r = run(
        &["--launcher", "local", "--nodes", "3", "-n", "6"],
        &fixture("token_ring"),
        &[],
    );
    r.assert_ok("token_ring on 3 local daemons");
}

/// A launcher-exec that, before starting the real daemon, lets a client holding a wrong
/// secret (a `strobe node` with another `STROBE_JOB_SECRET`) knock on the Machine
/// Manager's control port: it must be refused and logged, and the job still run.
#[test]
fn summary_of_a_job_on_daemons_has_a_line_per_node() {
    let r = run(
        &[
            "--launcher",
            "local",
            "--nodes",
            "2",
            "-n",
            "3",
            "--summary",
        ],
        &fixture("token_ring"),
        &[],
    );
    r.assert_ok("token_ring with --summary on two local daemons");
    assert!(r.stderr.contains("strobe summary"), "{}", r.stderr);
    let slices: u64 = r
        .stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("slices"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no slice count in the summary: {}", r.stderr));
    assert!(slices > 0, "{}", r.stderr);
    let host = strobe_runtime::daemon::node_host::host_name();
    // Block placement: ranks 0 and 1 on node 0, rank 2 on node 1.
    for (node, ranks) in [(0, "2 ranks"), (1, "1 rank,")] {
        let line = r
            .stderr
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("node {node} ")))
            .unwrap_or_else(|| panic!("no line for node {node}: {}", r.stderr));
        // The local launcher's host names, with the name the host gives itself.
        assert!(
            line.contains(&format!("host local{node} ({host})")),
            "{line}"
        );
        assert!(line.contains(ranks), "{line}");
        let n: u64 = line
            .trim_end()
            .trim_end_matches(" slices")
            .rsplit(' ')
            .next()
            .and_then(|w| w.parse().ok())
            .unwrap_or_else(|| panic!("no slice count: {line}"));
        assert!(n > 0 && n <= slices + 1, "{line} (job: {slices} slices)");
    }
}

#[test]
fn a_launcher_exec_that_does_not_exist_exits_127_naming_it() {
    let missing = "/nonexistent/strobe-test-rsh";
    let r = run(
        &["--hosts", "h1,h2", "--launcher-exec", missing, "-n", "2"],
        &fixture("hello"),
        &[],
    );
    assert_eq!(r.code, 127, "a missing remote shell: {}", r.stderr);
    assert!(
        r.stderr
            .contains(&format!("strobe: launcher-exec '{missing}': not found")),
        "the message names the program: {}",
        r.stderr
    );
    assert!(r.stdout.is_empty(), "nothing ran: {}", r.stdout);
    // `record` on daemons says and exits the same.
    let dir = tempfile::tempdir().expect("temp dir");
    let out = Command::new(strobe())
        .arg("record")
        .arg("-o")
        .arg(dir.path().join("job.db"))
        .args([
            "--hosts",
            "h1,h2",
            "--launcher-exec",
            missing,
            "-n",
            "2",
            "--",
        ])
        .arg(fixture("hello"))
        .output()
        .expect("spawn strobe");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(127), "record: {stderr}");
    assert!(
        stderr.contains(&format!("launcher-exec '{missing}': not found")),
        "record: {stderr}"
    );
}

#[test]
fn a_client_without_the_secret_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let rogue_out = dir.path().join("rogue.out");
    let script = dir.path().join("rogue-rsh");
    std::fs::write(
        &script,
        format!(
            r#"#!/bin/sh
# rogue-rsh HOST COMMAND-LINE: reads the daemon's environment lines, runs a rogue client
# against the Machine Manager, then the real daemon (locally) with the same lines.
shift
lines=""
while IFS= read -r l; do [ -z "$l" ] && break; lines="$lines$l
"; done
mm=$(printf '%s' "$lines" | sed -n 's/^STROBE_MM_ADDR=//p')
STROBE_JOB_SECRET=$(printf '%064d' 7) STROBE_MM_ADDR="$mm" STROBE_NODE=0 STROBE_NODES=1 \
    {strobe} node >{out} 2>&1
echo "rogue exit $?" >>{out}
printf '%s\n' "$lines" | sh -c "$*"
"#,
            strobe = strobe().display(),
            out = rogue_out.display()
        ),
    )
    .unwrap();
    let st = Command::new("chmod")
        .arg("+x")
        .arg(&script)
        .status()
        .unwrap();
    assert!(st.success());
    let exec = script.display().to_string();
    let r = run(
        &[
            "--hosts",
            "here",
            "--launcher-exec",
            &exec,
            "--iface",
            "127.0.0.1",
            "-n",
            "2",
        ],
        &fixture("hello"),
        &[],
    );
    r.assert_ok("the genuine daemon's job");
    assert_eq!(sorted_lines(&r.stdout).len(), 2, "{}", r.stdout);
    assert!(
        r.stderr.contains("refused a control connection") && r.stderr.contains("wrong job secret"),
        "{}",
        r.stderr
    );
    let rogue = std::fs::read_to_string(&rogue_out).unwrap();
    assert!(
        rogue.contains("could not prove") || rogue.contains("Machine Manager"),
        "{rogue}"
    );
    assert!(!rogue.contains("rogue exit 0"), "{rogue}");
}

// ---- across hosts.sh test hosts -----------------------------------------------------------

/// A hosts.sh instance, brought down on drop.
struct Hosts {
    id: String,
    /// The options `up` printed last (`--hosts h1,.. --launcher-exec ..`).
    printed: Vec<String>,
}

impl Hosts {
    fn up(id: u32, n: u32) -> Hosts {
        let mut h = Hosts {
            id: id.to_string(),
            printed: Vec::new(),
        };
        assert!(h.script(&["down"]).status.success());
        let out = h.script(&["up", &n.to_string()]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let last = stdout.lines().last().unwrap_or_default();
        h.printed = last.split_whitespace().map(String::from).collect();
        h
    }

    fn script(&self, args: &[&str]) -> Output {
        Command::new(hosts_sh())
            .args(args)
            .env("STROBE_HOSTS_ID", &self.id)
            .output()
            .expect("run hosts.sh")
    }

    fn rsh(&self) -> String {
        format!("/run/strobe-hosts/{}/rsh", self.id)
    }

    fn bridge(&self) -> String {
        format!("10.213.{}.254", self.id)
    }

    /// `pid args` of every process on `host`.
    fn ps(&self, host: &str) -> Vec<(u32, String)> {
        let out = self.script(&["exec", host, "ps", "-eo", "pid=,args="]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let l = l.trim();
                let (pid, args) = l.split_once(' ')?;
                Some((pid.parse().ok()?, args.trim().to_string()))
            })
            .collect()
    }

    /// The job's options for these hosts.
    fn args(&self, hosts: &str) -> Vec<String> {
        vec![
            "--hosts".into(),
            hosts.into(),
            "--launcher-exec".into(),
            self.rsh(),
            "--iface".into(),
            self.bridge(),
        ]
    }

    fn start(&self, hosts: &str, extra: &[&str], program: &Path, args: &[&str]) -> Child {
        Command::new(strobe())
            .arg("run")
            .args(self.args(hosts))
            .args(extra)
            .args(["--timeout", "120s", "--"])
            .arg(program)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn strobe")
    }

    /// Waits until `pred` holds for `host`'s processes (at most 60 s).
    fn await_ps(&self, host: &str, pred: impl Fn(&[(u32, String)]) -> bool) -> Vec<(u32, String)> {
        let t = Instant::now();
        loop {
            let ps = self.ps(host);
            if pred(&ps) {
                return ps;
            }
            assert!(t.elapsed() < Duration::from_secs(60), "{host}: {ps:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Nothing of the job left on `host`: no daemon, no rank.
    fn assert_nothing_left(&self, host: &str, program: &str) {
        let ps = self.await_ps(host, |ps| {
            ps.iter()
                .all(|(_, a)| !a.contains(program) && !a.contains("strobe node"))
        });
        assert!(ps.len() <= 3, "{host}: {ps:?}");
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        let _ = self.script(&["down"]);
    }
}

fn root_or_skip(what: &str) -> bool {
    if !is_root() {
        eprintln!("SKIPPED {what}: scripts/hosts.sh needs root (namespaces, bridges)");
    }
    is_root()
}

fn finish(child: Child, t: Instant) -> Run {
    output_of(child.wait_with_output().expect("wait for strobe"), t)
}

#[test]
fn ranks_run_on_a_test_host_with_output_forwarded() {
    if !root_or_skip("ranks_run_on_a_test_host_with_output_forwarded") {
        return;
    }
    let hosts = Hosts::up(170, 1);
    // Exactly the options `up` printed (no --iface: the Machine Manager cannot resolve
    // "h1" here, listens on every interface and the daemons reach it by this host's name).
    let mut args = hosts.printed.clone();
    args.extend(["-n".into(), "2".into(), "--tag-output".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = run(&args, &fixture("where"), &[]);
    r.assert_ok("where on h1");
    assert_eq!(
        sorted_lines(&r.stdout),
        ["[0] rank 0 of 2 on h1", "[1] rank 1 of 2 on h1"]
    );
    hosts.assert_nothing_left("h1", "where");
}

/// Six ranks on three hosts, in blocks: each rank reports the host it ran on.
#[test]
fn six_ranks_on_three_hosts_in_blocks() {
    if !root_or_skip("six_ranks_on_three_hosts_in_blocks") {
        return;
    }
    let hosts = Hosts::up(171, 3);
    let mut args = hosts.args("h1,h2,h3");
    args.extend(["-n".into(), "6".into(), "--tag-output".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = run(&args, &fixture("where"), &[]);
    r.assert_ok("where on 3 hosts");
    let want: Vec<String> = (0..6)
        .map(|r| format!("[{r}] rank {r} of 6 on h{}", r / 2 + 1))
        .collect();
    assert_eq!(sorted_lines(&r.stdout), want);
    for h in ["h1", "h2", "h3"] {
        hosts.assert_nothing_left(h, "where");
    }
}

/// The same job with the daemons started by MPICH's Hydra (`mpiexec -ppn 1`, through the
/// instance's remote shell): each daemon's node index comes from `PMI_RANK`.
#[test]
fn daemons_started_by_hydra_run_a_job() {
    if !root_or_skip("daemons_started_by_hydra_run_a_job") {
        return;
    }
    if !Path::new("/usr/bin/mpiexec.mpich").exists() {
        eprintln!("SKIPPED daemons_started_by_hydra_run_a_job: no mpiexec.mpich (Debian's mpich)");
        return;
    }
    let hosts = Hosts::up(176, 2);
    let mut args = hosts.args("h1,h2");
    args.extend(["--launcher".into(), "hydra".into(), "-n".into(), "4".into()]);
    args.push("--tag-output".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = run(&args, &fixture("where"), &[]);
    r.assert_ok("where on h1,h2 through Hydra");
    let want: Vec<String> = (0..4)
        .map(|r| format!("[{r}] rank {r} of 4 on h{}", r / 2 + 1))
        .collect();
    assert_eq!(sorted_lines(&r.stdout), want);
    for h in ["h1", "h2"] {
        hosts.assert_nothing_left(h, "where");
    }
}

#[test]
fn token_ring_and_collectives_across_three_hosts() {
    if !root_or_skip("token_ring_and_collectives_across_three_hosts") {
        return;
    }
    let hosts = Hosts::up(175, 3);
    let mut args = hosts.args("h1,h2,h3");
    args.extend(["-n".into(), "6".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    for name in ["token_ring", "collectives"] {
        let r = run(&args, &fixture(name), &[]);
        r.assert_ok(name);
    }
}

#[test]
fn a_killed_daemon_stops_the_job_with_a_report() {
    if !root_or_skip("a_killed_daemon_stops_the_job_with_a_report") {
        return;
    }
    let hosts = Hosts::up(172, 3);
    let t = Instant::now();
    let child = hosts.start("h1,h2,h3", &["-n", "6"], &fixture("where"), &["sleep=60"]);
    // Every rank up: then SIGKILL h2's daemon, by its pid in h2's namespace.
    for h in ["h1", "h3"] {
        hosts.await_ps(h, |ps| {
            ps.iter()
                .filter(|(_, a)| a.contains("where sleep=60"))
                .count()
                == 2
        });
    }
    let ps = hosts.await_ps("h2", |ps| {
        ps.iter()
            .filter(|(_, a)| a.contains("where sleep=60"))
            .count()
            == 2
    });
    let (daemon, _) = ps
        .iter()
        .find(|(_, a)| a.ends_with("strobe node --env-stdin") && !a.starts_with("sh "))
        .expect("the daemon runs on h2");
    // Mid-job nothing listens: not the Machine Manager (its control listener closed once
    // every daemon connected), not a daemon on any host (the fabric's, once joined).
    let mm = Command::new("ss").args(["-ltnpH"]).output().unwrap();
    let mm = String::from_utf8_lossy(&mm.stdout);
    assert!(
        !mm.contains(&format!("pid={},", child.id())),
        "the Machine Manager listens: {mm}"
    );
    for h in ["h1", "h2", "h3"] {
        let out = hosts.script(&["exec", h, "ss", "-ltnH"]);
        assert!(out.status.success());
        let listening = String::from_utf8_lossy(&out.stdout);
        assert!(listening.trim().is_empty(), "{h} listens: {listening}");
    }
    let out = hosts.script(&["exec", "h2", "kill", "-KILL", &daemon.to_string()]);
    assert!(out.status.success());
    let r = finish(child, t);
    assert_eq!(r.code, 128 + libc::SIGKILL, "{}", r.stderr);
    assert!(
        r.stderr.contains("node 1 (host h2) was lost in slice"),
        "{}",
        r.stderr
    );
    // h2's ranks died with their daemon (PR_SET_PDEATHSIG); the other daemons were
    // stopped and killed theirs: nothing of the job is left on any host.
    for h in ["h1", "h2", "h3"] {
        hosts.assert_nothing_left(h, "where");
    }
}

#[test]
fn a_host_whose_link_goes_down_is_reported_not_hung() {
    if !root_or_skip("a_host_whose_link_goes_down_is_reported_not_hung") {
        return;
    }
    let hosts = Hosts::up(173, 3);
    let t = Instant::now();
    let child = hosts.start("h1,h2,h3", &["-n", "6"], &fixture("where"), &["sleep=60"]);
    for h in ["h1", "h2", "h3"] {
        hosts.await_ps(h, |ps| {
            ps.iter()
                .filter(|(_, a)| a.contains("where sleep=60"))
                .count()
                == 2
        });
    }
    let veth = format!("sh{}h3", hosts.id);
    let st = Command::new("ip")
        .args(["link", "set", &veth, "down"])
        .status()
        .unwrap();
    assert!(st.success());
    let r = finish(child, t);
    assert_eq!(r.code, 128 + libc::SIGKILL, "{}", r.stderr);
    // Lost by a late heartbeat, or (the machine under load) by TCP keepalive breaking
    // the control connection first: either way node 2, named.
    assert!(
        r.stderr.contains("node 2 (host h3) was lost")
            && (r.stderr.contains("heartbeat is late") || r.stderr.contains("control connection")),
        "{}",
        r.stderr
    );
    eprintln!("link down: {}", r.stderr.trim());
    // h3's daemon, cut off, missed the Machine Manager's heartbeat too: it killed its
    // ranks and left; the others were stopped.
    for h in ["h1", "h2", "h3"] {
        hosts.assert_nothing_left(h, "where");
    }
}

#[test]
fn a_program_that_differs_on_a_host_is_refused() {
    if !root_or_skip("a_program_that_differs_on_a_host_is_refused") {
        return;
    }
    let hosts = Hosts::up(174, 1);
    let dir = tempfile::tempdir().unwrap();
    let prog = dir.path().join("prog");
    std::fs::copy(fixture("where"), &prog).unwrap();
    // In h1's mount namespace only, the same path holds another program.
    let out = hosts.script(&[
        "exec",
        "h1",
        "mount",
        "--bind",
        fixture("hello").to_str().unwrap(),
        prog.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut args = hosts.args("h1");
    args.extend(["-n".into(), "1".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = run(&args, &prog, &[]);
    assert_eq!(r.code, 127, "{}", r.stderr);
    assert!(
        r.stderr.contains("node 0 (host h1)") && r.stderr.contains("sha256 mismatch"),
        "{}",
        r.stderr
    );
    assert!(r.stdout.is_empty(), "nothing ran: {}", r.stdout);
    let _ = hosts.script(&["exec", "h1", "umount", prog.to_str().unwrap()]);
}
