//! Issue 16: `strobe doctor` says what verbs (RDMA) sees on this host, and why it cannot
//! be used, in one plain line: the real binary, the real libibverbs (installed by
//! scripts/ensure-tools.sh), and this machine, which has no RDMA device.

use std::process::Command;

use strobe_tests::replay::strobe_cmd;

fn has_rdma_device() -> bool {
    std::fs::read_dir("/sys/class/infiniband").is_ok_and(|mut d| d.next().is_some())
}

fn verdict(stdout: &str) -> &str {
    stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("verbs:"))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no verdict line in:\n{stdout}"))
}

#[test]
fn doctor_explains_a_host_without_rdma_device() {
    let out = strobe_cmd(
        &["doctor"],
        &[("STROBE_VERBS_PROVIDER", ""), ("STROBE_VERBS_DEVICE", "")],
    );
    assert!(out.stdout.starts_with("verbs (RDMA):\n"), "{}", out.stdout);
    if has_rdma_device() {
        eprintln!("this host has an RDMA device: only the report's shape is checked");
        assert!(
            out.code == 0 || out.code == 1,
            "{}{}",
            out.stdout,
            out.stderr
        );
        return;
    }
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("library:  libibverbs.so.1 (libibverbs)"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("devices:  none"), "{}", out.stdout);
    assert!(out.stdout.contains("memlock:  "), "{}", out.stdout);
    assert_eq!(
        verdict(&out.stdout),
        "unavailable: no RDMA device (/sys/class/infiniband is empty)"
    );
    assert!(
        out.stderr.is_empty(),
        "libibverbs must not chatter: {}",
        out.stderr
    );
}

#[test]
fn doctor_names_a_missing_library() {
    let out = strobe_cmd(
        &["doctor"],
        &[("STROBE_VERBS_LIBRARY", "/nonexistent/libibverbs.so.1")],
    );
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert_eq!(
        verdict(&out.stdout),
        "unavailable: /nonexistent/libibverbs.so.1 not found (install rdma-core / libibverbs1)"
    );
}

#[test]
fn doctor_refuses_an_unknown_provider() {
    let out = strobe_cmd(&["doctor"], &[("STROBE_VERBS_PROVIDER", "psm2")]);
    assert_eq!(out.code, 1);
    assert_eq!(
        verdict(&out.stdout),
        "unavailable: STROBE_VERBS_PROVIDER=psm2: unknown provider (libibverbs or emulated)"
    );
}

#[test]
fn verbs_check_says_plainly_that_it_checked_nothing_without_a_device() {
    if has_rdma_device() {
        eprintln!("this host has an RDMA device: scripts/verbs-check.sh would run for real");
        return;
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/verbs-check.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .output()
        .expect("run scripts/verbs-check.sh");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "no RDMA device: nothing to check\n"
    );
    let bad = std::process::Command::new("bash")
        .arg(&script)
        .arg("--bogus")
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "a bad command line");
}

#[path = "../../runtime/tests/support/fake_ibverbs.rs"]
mod fake_ibverbs;

/// `strobe doctor` with libibverbs replaced by the stand-in of
/// runtime/tests/support/fake_ibverbs.c (one InfiniBand device, `fake0`): the report of a
/// host where verbs works, and of one whose only port is down, through the real binary.
fn doctor_over_fake(env: &[(&str, &str)]) -> Option<strobe_tests::replay::Out> {
    let lib = fake_ibverbs::library()?;
    let mut all = vec![("STROBE_VERBS_LIBRARY", lib.to_str().unwrap())];
    all.extend_from_slice(env);
    Some(strobe_cmd(&["doctor"], &all))
}

#[test]
fn doctor_shows_a_usable_device_its_ports_and_the_memlock_limit() {
    let Some(out) = doctor_over_fake(&[]) else {
        return;
    };
    assert!(out.stdout.contains("device:   fake0\n"), "{}", out.stdout);
    assert!(
        out.stdout.contains(
            "port 1: active, InfiniBand, LID addressing, lid 17, \
             gid[0] fe80:0000:0000:0000:0000:0000:0000:0001, mtu 4096"
        ),
        "{}",
        out.stdout
    );
    let verdict = verdict(&out.stdout);
    if verdict.starts_with("unavailable: locked-memory limit") {
        // Not root, and a limit below 64 MiB: the one refusal a usable device can get.
        assert_eq!(out.code, 1);
        return;
    }
    assert_eq!(verdict, "usable: fake0 port 1 (InfiniBand, LID addressing)");
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
}

#[test]
fn doctor_explains_a_port_that_is_down_and_a_pinned_device_that_is_absent() {
    let Some(down) = doctor_over_fake(&[("FAKE_IBV_PORT_DOWN", "1")]) else {
        return;
    };
    assert_eq!(down.code, 1);
    assert!(down.stdout.contains("port 1: down"), "{}", down.stdout);
    assert_eq!(
        verdict(&down.stdout),
        "unavailable: device fake0 has no active port"
    );
    let pinned = doctor_over_fake(&[("STROBE_VERBS_DEVICE", "mlx5_0")]).unwrap();
    assert_eq!(
        verdict(&pinned.stdout),
        "unavailable: STROBE_VERBS_DEVICE=mlx5_0: no such device (this host has fake0)"
    );
    let none = doctor_over_fake(&[("FAKE_IBV_NO_DEVICE", "1")]).unwrap();
    assert_eq!(
        verdict(&none.stdout),
        "unavailable: no RDMA device (/sys/class/infiniband is empty)"
    );
}

#[test]
fn doctor_refuses_a_locked_memory_limit_too_low_for_rdma() {
    // A user without CAP_IPC_LOCK and a 1 MiB limit: only root can set that up here.
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let Some(lib) = fake_ibverbs::library() else {
        return;
    };
    if !root || Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("skipped: needs root and setpriv to run strobe doctor as another user");
        return;
    }
    let out = Command::new("prlimit")
        .args([
            "--memlock=1048576:1048576",
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
        ])
        .args(["--clear-groups"])
        .arg(strobe_tests::strobe())
        .arg("doctor")
        .env("STROBE_VERBS_LIBRARY", &lib)
        .output()
        .expect("run prlimit");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("memlock:  1 MiB\n"), "{stdout}");
    let verdict = verdict(&stdout);
    assert!(
        verdict.starts_with(
            "unavailable: locked-memory limit is 1 MiB but RDMA needs at least 64 MiB \
             registered: run `ulimit -l unlimited` first"
        ),
        "{verdict}"
    );
}
