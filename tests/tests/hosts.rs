//! Node endpoints as separate processes over the TCP transport: on loopback, and across the
//! test hosts of `scripts/hosts.sh` (separate network, PID, UTS and mount namespaces on a
//! private bridge). The multi-host part needs root (CI runs as root); without it, it says
//! so and skips.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use strobe_runtime::transport::auth::{JobSecret, SECRET_ENV};
use strobe_runtime::transport::tcp::{TcpBinding, TcpConfig, TcpEndpoint};
use strobe_runtime::transport::{EventId, NodeSet, Transport, TransportError, Wait};

fn endpoint_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tcp_endpoint"))
}

fn hosts_sh() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/hosts.sh")
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// One endpoint process, after it printed its listening address.
struct Endpoint {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    addr: SocketAddr,
}

impl Endpoint {
    /// Starts `cmd` (a `tcp_endpoint` invocation, maybe behind `hosts.sh exec`) with the
    /// job secret in its environment, and reads its address.
    fn start(mut cmd: Command, secret: &JobSecret) -> Endpoint {
        let mut child = cmd
            .env(SECRET_ENV, secret.to_hex())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn tcp_endpoint");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let addr = line
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("expected 'listening ADDR', got {line:?}"))
            .trim()
            .parse()
            .unwrap();
        Endpoint {
            stdin: child.stdin.take(),
            child,
            stdout,
            addr,
        }
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line.trim().to_string()
    }

    fn finish(mut self) -> (String, std::process::ExitStatus) {
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut self.stdout, &mut rest).unwrap();
        (rest, self.child.wait().unwrap())
    }
}

/// The rendezvous: every endpoint gets everybody's addresses on stdin.
fn rendezvous(eps: &mut [Endpoint], extra_first: Option<SocketAddr>) {
    let list: Vec<String> = extra_first
        .into_iter()
        .chain(eps.iter().map(|e| e.addr))
        .map(|a| a.to_string())
        .collect();
    for e in eps.iter_mut() {
        let mut stdin = e.stdin.take().unwrap();
        writeln!(stdin, "{}", list.join(",")).unwrap();
    }
}

fn endpoint_cmd(prefix: &[String], node: u32, nodes: u32, listen: &str, scenario: &str) -> Command {
    let mut argv: Vec<String> = prefix.to_vec();
    argv.push(endpoint_bin().display().to_string());
    argv.extend([
        node.to_string(),
        nodes.to_string(),
        listen.into(),
        scenario.into(),
    ]);
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    cmd
}

/// Runs the `exchange` scenario with `listens.len()` endpoint processes; returns each
/// one's report line.
fn run_exchange(prefixes: &[Vec<String>], listens: &[String]) -> Vec<String> {
    let secret = JobSecret::generate().unwrap();
    let n = listens.len() as u32;
    let mut eps: Vec<Endpoint> = (0..n)
        .map(|i| {
            let cmd = endpoint_cmd(
                &prefixes[i as usize],
                i,
                n,
                &listens[i as usize],
                "exchange",
            );
            Endpoint::start(cmd, &secret)
        })
        .collect();
    rendezvous(&mut eps, None);
    eps.into_iter()
        .map(|e| {
            let (out, status) = e.finish();
            assert!(status.success(), "endpoint failed ({status}): {out}");
            out.trim().to_string()
        })
        .collect()
}

#[test]
fn three_endpoint_processes_on_loopback() {
    let listens = vec!["127.0.0.1:0".to_string(); 3];
    let reports = run_exchange(&[vec![], vec![], vec![]], &listens);
    for (i, r) in reports.iter().enumerate() {
        assert!(r.starts_with(&format!("ok node {i} ")), "{r}");
        assert!(r.ends_with("counter 600"), "{r}");
    }
}

/// This process is node 0; the endpoint process is node 1. Killing it while node 0 keeps
/// sending must end node 0's operations with an error, not a hang.
#[test]
fn peer_killed_mid_transfer_is_an_error() {
    let secret = JobSecret::generate().unwrap();
    let config = TcpConfig::new(2, 1 << 20, 2, secret.clone());
    let me = TcpBinding::bind(0, "127.0.0.1:0".parse().unwrap(), config).unwrap();
    let mut peer = Endpoint::start(endpoint_cmd(&[], 1, 2, "127.0.0.1:0", "sink"), &secret);
    rendezvous(
        std::slice::from_mut(&mut peer),
        Some(me.local_addr().unwrap()),
    );
    let ep = me.join(&[me_addr_placeholder(), peer.addr]).unwrap();
    assert_eq!(peer.line(), "joined");
    let block = vec![0x5a; 1 << 20];
    ep.xfer_and_signal(&block, &NodeSet::single(1), 0, None, None)
        .expect("the first transfer, before the kill");
    peer.child.kill().unwrap();
    let t = Instant::now();
    let err = loop {
        match ep.xfer_and_signal(&block, &NodeSet::single(1), 0, None, None) {
            Ok(()) => assert!(t.elapsed() < Duration::from_secs(30), "still succeeding"),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, TransportError::Io(_)), "{err:?}");
    // Whichever thread noticed (the sender's write, the reader), the endpoint is broken
    // by the time the caller sees the error.
    assert!(ep.failure().is_some(), "{err}");
    // A blocked Test-Event wakes up with the failure too.
    assert!(matches!(
        ep.test_event(EventId(0), Wait::Block),
        Err(TransportError::Io(_))
    ));
    assert!(
        ep.failure().unwrap().contains("node 1"),
        "{:?}",
        ep.failure()
    );
    let _ = peer.child.wait();
}

/// `join` ignores this node's own entry of the address list.
fn me_addr_placeholder() -> SocketAddr {
    "0.0.0.0:0".parse().unwrap()
}

// ---- across hosts.sh namespaces -----------------------------------------------------------

static INSTANCE: AtomicU32 = AtomicU32::new(0);

/// A hosts.sh instance, brought down (and checked gone) on drop.
struct Hosts {
    id: String,
}

impl Hosts {
    fn up(n: u32) -> Hosts {
        // An instance id of our own (100..199), so parallel test runs do not clash.
        let id = 100 + (std::process::id() + INSTANCE.fetch_add(1, Ordering::SeqCst)) % 100;
        let h = Hosts { id: id.to_string() };
        let out = h.script(&["down"]);
        assert!(out.status.success());
        let out = h.script(&["up", &n.to_string()]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let last = stdout.lines().last().unwrap_or_default();
        let names: Vec<String> = (1..=n).map(|k| format!("h{k}")).collect();
        assert_eq!(
            last,
            format!(
                "--hosts {} --launcher-exec /run/strobe-hosts/{id}/rsh",
                names.join(",")
            )
        );
        h
    }

    fn script(&self, args: &[&str]) -> Output {
        Command::new(hosts_sh())
            .args(args)
            .env("STROBE_HOSTS_ID", &self.id)
            .output()
            .expect("run hosts.sh")
    }

    fn exec_prefix(&self, host: &str) -> Vec<String> {
        vec![
            "env".into(),
            format!("STROBE_HOSTS_ID={}", self.id),
            hosts_sh().display().to_string(),
            "exec".into(),
            host.into(),
        ]
    }

    fn sh(&self, host: &str, script: &str) -> String {
        let out = self.script(&["exec", host, "sh", "-c", script]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn addr(&self, k: u32) -> String {
        format!("10.213.{}.{k}", self.id)
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        let _ = self.script(&["down"]);
    }
}

fn check_nothing_left(id: &str) {
    let netns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let links = Command::new("ip").args(["-o", "link"]).output().unwrap();
    let netns = String::from_utf8_lossy(&netns.stdout);
    let links = String::from_utf8_lossy(&links.stdout);
    assert!(!netns.contains(&format!("strobe{id}-")), "{netns}");
    assert!(!links.contains(&format!(" sh{id}")), "{links}");
    let inits = Command::new("pgrep")
        .args(["-f", &format!("/run/strobe-hosts/{id}/etc-hosts")])
        .output()
        .unwrap();
    assert!(inits.stdout.is_empty(), "host inits left");
}

#[test]
fn across_test_hosts() {
    if !is_root() {
        eprintln!("SKIPPED across_test_hosts: scripts/hosts.sh needs root (namespaces, bridges)");
        return;
    }
    let hosts = Hosts::up(3);
    // Each host has its own hostname and sees only its own processes.
    assert_eq!(hosts.sh("h1", "hostname"), "h1");
    assert_eq!(hosts.sh("h2", "hostname"), "h2");
    // The printed launcher is ssh-compatible: one command line for the host's shell.
    let rsh = Command::new(format!("/run/strobe-hosts/{}/rsh", hosts.id))
        .args(["h3", "echo", "$(hostname)", "reached"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&rsh.stdout).trim(), "h3 reached");
    // MPICH's Hydra launches across the hosts through the same script.
    if std::path::Path::new("/usr/bin/mpiexec.mpich").exists() {
        let out = Command::new("timeout")
            .args(["60", "mpiexec.mpich", "-launcher", "rsh", "-launcher-exec"])
            .arg(format!("/run/strobe-hosts/{}/rsh", hosts.id))
            .args(["-hosts", "h1,h2", "-n", "2", "hostname"])
            .output()
            .unwrap();
        let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["h1", "h2"],
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let h2_pids = hosts.sh(
        "h2",
        "sleep 30 >/dev/null 2>&1 & echo $!; ls /proc | grep -c '^[0-9]'",
    );
    let h1_procs = hosts.sh("h1", "ls /proc | grep '^[0-9]' | tr '\\n' ' '");
    let h2_sleep: u32 = h2_pids.lines().next().unwrap().parse().unwrap();
    let h1_count = h1_procs.split_whitespace().count();
    assert!(h1_count < 10, "h1 sees {h1_count} processes: {h1_procs}");
    // h2's sleep is pid 3 or so *in h2*; h1 does not see h2's processes at all, and its
    // own processes are not h2's.
    let h2_sleep_in_h1 = hosts.sh("h1", &format!("test -e /proc/{h2_sleep}/cmdline && cat /proc/{h2_sleep}/cmdline | tr '\\0' ' ' || echo absent"));
    assert!(
        !h2_sleep_in_h1.contains("sleep 30"),
        "h1 sees h2's sleep: {h2_sleep_in_h1}"
    );
    // Three endpoint processes, one per host, over the bridge.
    let prefixes: Vec<Vec<String>> = (1..=3)
        .map(|k| hosts.exec_prefix(&format!("h{k}")))
        .collect();
    let listens: Vec<String> = (1..=3).map(|k| format!("{}:7100", hosts.addr(k))).collect();
    let reports = run_exchange(&prefixes, &listens);
    for (i, r) in reports.iter().enumerate() {
        assert!(
            r.starts_with(&format!("ok node {i} host h{} ", i + 1)),
            "{r}"
        );
        assert!(r.ends_with("counter 600"), "{r}");
    }
    // Nothing listens after the job (this machine reaches the hosts through the bridge).
    assert!(
        TcpStream::connect_timeout(&listens[0].parse().unwrap(), Duration::from_secs(2)).is_err()
    );
    link_down_is_an_error(&hosts);
    let id = hosts.id.clone();
    drop(hosts);
    check_nothing_left(&id);
}

/// This process (node 0, on this machine's side of the bridge) sends to an endpoint in h2,
/// then h2's link goes down (`ip link set ... down`: no FIN, no RST, the host just
/// vanishes). The transfers must end with an error once the TCP user timeout or the
/// request timeout expires, not hang.
fn link_down_is_an_error(hosts: &Hosts) {
    let secret = JobSecret::generate().unwrap();
    let mut config = TcpConfig::new(2, 1 << 20, 2, secret.clone());
    config.request_timeout = Duration::from_secs(3);
    let bridge: SocketAddr = format!("10.213.{}.254:0", hosts.id).parse().unwrap();
    let me = TcpBinding::bind(0, bridge, config).unwrap();
    let listen = format!("{}:7101", hosts.addr(2));
    let cmd = endpoint_cmd(&hosts.exec_prefix("h2"), 1, 2, &listen, "sink");
    let mut peer = Endpoint::start(cmd, &secret);
    rendezvous(
        std::slice::from_mut(&mut peer),
        Some(me.local_addr().unwrap()),
    );
    let ep = me.join(&[me_addr_placeholder(), peer.addr]).unwrap();
    assert_eq!(peer.line(), "joined");
    let block = vec![7u8; 1 << 20];
    ep.xfer_and_signal(&block, &NodeSet::single(1), 0, None, None)
        .unwrap();
    let veth = format!("sh{}h2", hosts.id);
    let st = Command::new("ip")
        .args(["link", "set", &veth, "down"])
        .status()
        .unwrap();
    assert!(st.success());
    let t = Instant::now();
    let err = loop {
        match ep.xfer_and_signal(&block, &NodeSet::single(1), 0, None, None) {
            Ok(()) => assert!(t.elapsed() < Duration::from_secs(60), "still succeeding"),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, TransportError::Io(_)), "{err:?}");
    eprintln!("link down: {err} after {:?}", t.elapsed());
    // The silent peer is treated as lost: the endpoint is broken, waits end at once.
    assert!(ep.failure().is_some());
    assert!(matches!(
        ep.test_event(EventId(0), Wait::Block),
        Err(TransportError::Io(_))
    ));
    drop(ep);
    let _ = peer.child.kill();
    let _ = peer.child.wait();
}

/// Keeps the loopback endpoint helper honest: a job of 2 in one process still works when
/// both endpoints live in threads (the conformance suite does the rest).
#[test]
fn loopback_job_helper_wires_up() {
    let eps = TcpEndpoint::loopback_job(2, 64, 1).unwrap();
    eps[0]
        .xfer_and_signal(b"hi", &NodeSet::single(1), 0, None, Some(EventId(0)))
        .unwrap();
    assert!(eps[1].test_event(EventId(0), Wait::Poll).unwrap());
}
