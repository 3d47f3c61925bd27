//! A rank dies with the strobe that started it. The launcher spawns ranks with posix_spawn
//! (no code runs in the child before exec), so a rank sets its death signal itself: libmpi
//! at load time, before `main` (`procmem::die_with_launcher`), and the Rust API again at
//! init. Real processes, real signals.

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use strobe_tests::tools::build_c;
use strobe_tests::{assert_processes_gone, processes_matching};

#[test]
fn c_ranks_die_when_the_launcher_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c("synth_barrier", dir.path());
    let mut strobe = Command::new(strobe_tests::strobe())
        .args(["run", "-n", "3", "--"])
        .arg(&prog)
        .args(["gran=10", "iters=100000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let needle = format!("{} gran=10 iters=100000", prog.display());
    let t = Instant::now();
    while processes_matching(&needle).len() < 3 {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the ranks never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    strobe.kill().unwrap();
    strobe.wait().unwrap();
    assert_processes_gone(&needle, "after SIGKILL of strobe run");
}

/// A rank whose launcher is already gone when libmpi loads (its parent is not the pid it
/// was given) is killed before `main`, as the death signal would have done; a program
/// strobe did not start is left alone (it then fails at `MPI_Init` with its own error).
#[test]
fn a_rank_whose_launcher_is_gone_dies_at_load_and_other_processes_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c("synth_barrier", dir.path());
    let orphan = Command::new(&prog)
        .env("STROBE_LAUNCHER_PID", "1")
        .env("STROBE_RANK", "0")
        .output()
        .unwrap();
    assert_eq!(
        orphan.status.signal(),
        Some(libc::SIGKILL),
        "{:?}: {}",
        orphan.status,
        String::from_utf8_lossy(&orphan.stderr)
    );
    assert!(orphan.stdout.is_empty(), "main ran");
    let alone = Command::new(&prog)
        .env_remove("STROBE_LAUNCHER_PID")
        .env_remove("STROBE_RANK")
        .output()
        .unwrap();
    assert_eq!(alone.status.signal(), None, "{:?}", alone.status);
}
