//! The launchers (runtime/src/daemon/launch) starting real processes: the local launcher;
//! the ssh launcher through a local remote shell (quoting and the environment on stdin);
//! and, as root, the ssh and Hydra launchers across the test hosts of `scripts/hosts.sh`
//! (Debian's `mpiexec.mpich`, its PMI-1 key-value space used by the probes). Every test
//! checks that the job secret is in no running process's argv (`/proc/*/cmdline`) while
//! the launched probes run.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use strobe_runtime::daemon::launch::hydra::HydraLauncher;
use strobe_runtime::daemon::launch::slurm::{expand_nodelist, SlurmLauncher};
use strobe_runtime::daemon::launch::ssh::SshLauncher;
use strobe_runtime::daemon::launch::{DaemonCommand, Launcher, LocalLauncher};
use strobe_runtime::transport::auth::{JobSecret, SECRET_ENV};

fn probe_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_launch_probe"))
}

fn hosts_sh() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/hosts.sh")
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// One launch of probes: their output directory and the file that releases them.
struct Run {
    dir: tempfile::TempDir,
    secret: String,
}

impl Run {
    fn new() -> Run {
        Run {
            dir: tempfile::tempdir().unwrap(),
            secret: JobSecret::generate().unwrap().to_hex(),
        }
    }

    fn command(&self, program: PathBuf, extra: &[&str]) -> DaemonCommand {
        let mut args: Vec<OsString> = vec!["--out".into(), self.dir.path().into()];
        args.push("--hold".into());
        args.push(self.hold_file().into());
        args.extend(extra.iter().map(OsString::from));
        DaemonCommand {
            program,
            args,
            env: vec![
                (SECRET_ENV.into(), self.secret.clone().into()),
                ("STROBE_MM_ADDR".into(), "10.0.0.1:9".into()),
            ],
        }
    }

    fn hold_file(&self) -> PathBuf {
        self.dir.path().join("release")
    }

    /// Waits for `nodes` reports while the probes hold, checks every argv on the machine
    /// for the secret, releases the probes, waits for the launcher processes.
    fn collect(&self, nodes: usize, children: Vec<Child>) -> BTreeMap<u32, String> {
        let deadline = Instant::now() + Duration::from_secs(90);
        let path = |n: usize| self.dir.path().join(format!("node-{n}"));
        while !(0..nodes).all(|n| path(n).exists()) {
            assert!(Instant::now() < deadline, "probes did not all report");
            std::thread::sleep(Duration::from_millis(50));
        }
        let probes = no_argv_holds(&self.secret);
        assert!(
            probes >= nodes,
            "saw {probes} running probes, expected {nodes}"
        );
        std::fs::write(self.hold_file(), b"").unwrap();
        for mut child in children {
            let status = wait_bounded(&mut child, deadline);
            assert!(status.success(), "launcher process: {status}");
        }
        (0..nodes)
            .map(|n| (n as u32, std::fs::read_to_string(path(n)).unwrap()))
            .collect()
    }
}

fn wait_bounded(child: &mut Child, deadline: Instant) -> std::process::ExitStatus {
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("a launcher process did not end");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// No process's argv holds `secret`; returns how many running `launch_probe` were seen.
fn no_argv_holds(secret: &str) -> usize {
    let mut probes = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        assert!(
            !text.contains(secret),
            "the secret is in the argv of {text}"
        );
        if text.contains("launch_probe") && text.contains("--hold") {
            probes += 1;
        }
    }
    probes
}

fn names(n: usize) -> Vec<String> {
    (1..=n).map(|k| format!("h{k}")).collect()
}

#[test]
fn local_launcher_starts_one_daemon_per_node() {
    let run = Run::new();
    let children = LocalLauncher
        .start(&names(3), &run.command(probe_bin(), &[]))
        .unwrap();
    let reports = run.collect(3, children);
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    for (node, report) in reports {
        assert_eq!(
            report,
            format!(
                "probe host={} node={node} nodes=3 env=env secret=yes\n",
                host.trim()
            )
        );
    }
}

#[test]
fn ssh_launcher_quotes_the_command_and_sends_env_on_stdin() {
    // A remote shell with ssh's semantics that stays on this machine: the words after the
    // host are one command line for `sh -c`.
    let tools = tempfile::tempdir().unwrap();
    let rsh = tools.path().join("rsh");
    std::fs::write(
        &rsh,
        "#!/bin/sh\nwhile [ \"${1#-}\" != \"$1\" ]; do shift; done\nshift\nexec sh -c \"$*\"\n",
    )
    .unwrap();
    Command::new("chmod").arg("+x").arg(&rsh).status().unwrap();
    // The remote program's path needs quoting: a space and a '$'.
    let odd_dir = tools.path().join("my $HOME dir");
    std::fs::create_dir(&odd_dir).unwrap();
    let remote = odd_dir.join("launch_probe");
    std::os::unix::fs::symlink(probe_bin(), &remote).unwrap();
    let launcher = SshLauncher::new(Some(&format!("{} -x", rsh.display())), Some(remote)).unwrap();
    let run = Run::new();
    let children = launcher
        .start(&names(2), &run.command("/nonexistent/strobe".into(), &[]))
        .unwrap();
    for (node, report) in run.collect(2, children) {
        assert!(
            report.contains(&format!("node={node} nodes=2 env=stdin secret=yes\n")),
            "{report}"
        );
    }
}

#[test]
fn ssh_launcher_reports_a_remote_shell_that_does_not_exist() {
    let launcher = SshLauncher::new(Some("/nonexistent/rsh"), None).unwrap();
    let run = Run::new();
    let err = launcher
        .start(&names(2), &run.command(probe_bin(), &[]))
        .unwrap_err();
    assert!(err.to_string().contains("/nonexistent/rsh"), "{err}");
}

/// A hosts.sh instance of this file's range (160..169), brought down on drop.
struct Hosts {
    id: String,
    tools: tempfile::TempDir,
}

impl Hosts {
    fn up(n: usize) -> Hosts {
        let hosts = Hosts {
            id: (160 + std::process::id() % 10).to_string(),
            tools: tempfile::tempdir().unwrap(),
        };
        // The instance's rsh passes this process's whole environment into the host; ssh
        // passes none. This wrapper clears it, so whatever reaches a daemon came the way
        // it would over ssh: stdin (ssh launcher) or Hydra's own -genvlist forwarding.
        let script = format!(
            "#!/bin/sh\nexec env -i PATH=\"$PATH\" /run/strobe-hosts/{}/rsh \"$@\"\n",
            hosts.id
        );
        std::fs::write(hosts.rsh(), script).unwrap();
        Command::new("chmod")
            .arg("+x")
            .arg(hosts.rsh())
            .status()
            .unwrap();
        assert!(hosts.script(&["down"]).status.success());
        let out = hosts.script(&["up", &n.to_string()]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        hosts
    }

    fn script(&self, args: &[&str]) -> std::process::Output {
        Command::new(hosts_sh())
            .args(args)
            .env("STROBE_HOSTS_ID", &self.id)
            .output()
            .unwrap()
    }

    /// An ssh-like remote shell into the hosts: no environment crosses it.
    fn rsh(&self) -> String {
        self.tools.path().join("ssh-like").display().to_string()
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        let _ = self.script(&["down"]);
    }
}

#[test]
fn ssh_hydra_and_slurm_across_test_hosts() {
    if !is_root() {
        eprintln!("SKIPPED ssh_hydra_and_slurm_across_test_hosts: scripts/hosts.sh needs root");
        return;
    }
    let hosts = Hosts::up(3);
    let names = names(3);
    ssh_across(&hosts, &names);
    assert!(
        Path::new("/usr/bin/mpiexec.mpich").exists(),
        "mpiexec.mpich is missing: Debian's mpich is a CI dependency"
    );
    hydra_across(&hosts, &names);
    slurm_across(&hosts, &names);
}

fn slurm_across(hosts: &Hosts, names: &[String]) {
    let slurm = Slurm::up("up-hosts", 6837, Some(hosts));
    // An allocation's host list, as Slurm writes it (compressed: h[1-3]), expands to the
    // hosts in order.
    let out = Command::new("salloc")
        .args(["-N3", "printenv", "SLURM_JOB_NODELIST"])
        .env("SLURM_CONF", slurm.conf())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list = String::from_utf8_lossy(&out.stdout);
    assert_eq!(expand_nodelist(list.trim()).unwrap(), names, "{list}");
    slurm_runs_mpi_jobs(&slurm);
    let run = Run::new();
    let mut cmd = run.command(probe_bin(), &[]);
    cmd.env.push(("SLURM_CONF".into(), slurm.conf().into()));
    let children = SlurmLauncher::new(None).start(names, &cmd).unwrap();
    assert_eq!(children.len(), 1, "one srun");
    for (node, report) in run.collect(names.len(), children) {
        assert_eq!(
            report,
            format!(
                "probe host={} node={node} nodes=3 env=env secret=yes\n",
                names[node as usize]
            )
        );
    }
}

/// `strobe run` (auto-detected, then `--launcher slurm`) inside an allocation of the 3 test hosts: one daemon per
/// host through srun, ranks in blocks, output forwarded, data between hosts.
fn slurm_runs_mpi_jobs(slurm: &Slurm) {
    let strobe = strobe_tests::strobe();
    let run = |extra: &[&str], prog: &str| {
        let mut c = Command::new("salloc");
        c.args(["-N3"])
            .arg(&strobe)
            .args(["run", "-n", "6", "--timeout", "60s"])
            .args(extra)
            .arg("--")
            .arg(strobe_tests::fixture(prog))
            .env("SLURM_CONF", slurm.conf());
        c.output().unwrap()
    };
    // No host option: inside a 3-node allocation strobe uses it (auto-detection).
    let out = run(&["--tag-output"], "where");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for rank in 0..6 {
        let line = format!("[{rank}] rank {rank} of 6 on h{}", rank / 2 + 1);
        assert!(stdout.lines().any(|l| l == line), "{line:?} in:\n{stdout}");
    }
    let ring = run(&["--launcher", "slurm"], "token_ring");
    assert!(
        ring.status.success(),
        "token_ring under srun: {}",
        String::from_utf8_lossy(&ring.stderr)
    );
}

fn ssh_across(hosts: &Hosts, names: &[String]) {
    let launcher = SshLauncher::new(Some(&hosts.rsh()), None).unwrap();
    let run = Run::new();
    let children = launcher
        .start(names, &run.command(probe_bin(), &[]))
        .unwrap();
    for (node, report) in run.collect(names.len(), children) {
        let host = &names[node as usize];
        assert_eq!(
            report,
            format!("probe host={host} node={node} nodes=3 env=stdin secret=yes\n")
        );
    }
}

fn hydra_across(hosts: &Hosts, names: &[String]) {
    let launcher =
        HydraLauncher::new(Some("/usr/bin/mpiexec.mpich".into()), Some(&hosts.rsh())).unwrap();
    let run = Run::new();
    let children = launcher
        .start(names, &run.command(probe_bin(), &[]))
        .unwrap();
    assert_eq!(children.len(), 1, "one mpiexec");
    for (node, report) in run.collect(names.len(), children) {
        let mut expected = format!(
            "probe host={} node={node} nodes=3 env=env secret=yes\n",
            names[node as usize]
        );
        for peer in (0..names.len()).filter(|&p| p != node as usize) {
            expected.push_str(&format!("peer {peer} {}\n", names[peer]));
        }
        assert_eq!(report, expected);
    }
}

/// A Slurm cluster of `scripts/slurm.sh`, brought down on drop: `up` (this machine as the
/// one node) or `up-hosts` (one slurmd per test host of `hosts`).
struct Slurm {
    dir: String,
    port: u16,
    hosts_id: Option<String>,
}

impl Slurm {
    fn up(verb: &str, port: u16, hosts: Option<&Hosts>) -> Slurm {
        let slurm = Slurm {
            dir: format!("/run/strobe-slurm-launchers-{}-{port}", std::process::id()),
            port,
            hosts_id: hosts.map(|h| h.id.clone()),
        };
        let out = slurm.script(verb);
        assert!(
            out.status.success(),
            "scripts/slurm.sh up: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        slurm
    }

    fn script(&self, verb: &str) -> std::process::Output {
        let mut cmd =
            Command::new(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/slurm.sh"));
        cmd.arg(verb)
            .env("STROBE_SLURM_DIR", &self.dir)
            .env("STROBE_SLURM_PORT", self.port.to_string());
        if let Some(id) = &self.hosts_id {
            cmd.env("STROBE_HOSTS_ID", id);
        }
        cmd.output().unwrap()
    }

    fn conf(&self) -> String {
        format!("{}/slurm.conf", self.dir)
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        let _ = self.script("down");
    }
}

#[test]
fn slurm_launcher_runs_srun_on_a_single_node_cluster() {
    if !is_root() {
        eprintln!("SKIPPED slurm_launcher_runs_srun_on_a_single_node_cluster: needs root");
        return;
    }
    let slurm = Slurm::up("up", 6827, None);
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let host = host.trim().split('.').next().unwrap().to_string();
    let run = Run::new();
    let mut cmd = run.command(probe_bin(), &[]);
    cmd.env.push(("SLURM_CONF".into(), slurm.conf().into()));
    let children = SlurmLauncher::new(None)
        .start(std::slice::from_ref(&host), &cmd)
        .unwrap();
    assert_eq!(children.len(), 1, "one srun");
    let reports = run.collect(1, children);
    // The daemon's node index came from SLURM_NODEID/SLURM_NNODES, the environment
    // (the secret among it) through srun's --export=ALL.
    assert_eq!(
        reports[&0],
        format!("probe host={host} node=0 nodes=1 env=env secret=yes\n")
    );
}

/// The PMI-1 client against Debian's Hydra on this machine (no root needed), in both of
/// its modes: an inherited socket (`PMI_FD`, the default) and a port to connect to
/// (`-pmi-port`: `PMI_PORT` and `PMI_ID`, the place told by `cmd=initack`).
#[test]
fn pmi_client_under_local_hydra_both_modes() {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    for mode in [None, Some("-pmi-port")] {
        let run = Run::new();
        let mut mpiexec = Command::new("mpiexec.mpich");
        mpiexec.args(mode).args(["-n", "3"]).arg(probe_bin());
        let probe = run.command(probe_bin(), &["--pmi"]);
        let child = mpiexec
            .args(&probe.args)
            .envs(probe.env.iter().map(|(k, v)| (k, v)))
            .spawn()
            .unwrap();
        for (node, report) in run.collect(3, vec![child]) {
            let mut expected = format!(
                "probe host={} node={node} nodes=3 env=env secret=yes\n",
                host.trim()
            );
            for peer in (0..3).filter(|&p| p != node) {
                expected.push_str(&format!("peer {peer} {}\n", host.trim()));
            }
            assert_eq!(report, expected, "mode {mode:?}");
        }
    }
}

/// A PMI environment that does not lead to a launcher is an error naming it, not a hang
/// or a panic.
#[test]
fn broken_pmi_environment_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    for (vars, expect) in [
        (
            &[("PMI_FD", "999"), ("PMI_RANK", "0"), ("PMI_SIZE", "1")][..],
            "PMI_FD=999",
        ),
        (&[("PMI_FD", "x")][..], "PMI_FD is \"x\""),
        (
            &[("PMI_PORT", "127.0.0.1:1"), ("PMI_ID", "0")][..],
            "PMI_PORT=127.0.0.1:1",
        ),
    ] {
        let out = Command::new(probe_bin())
            .args(["--pmi", "--out"])
            .arg(dir.path())
            .envs(vars.iter().copied())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{vars:?}: {stderr}");
        assert!(stderr.contains(expect), "{vars:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}
