//! What this machine can hold, checked before a single rank is spawned (`strobe run`,
//! `record` and `replay` all go through [`check_ranks`], called by the launcher).
//!
//! A rank is a process with at least two tasks (its main thread and its DMA Helper), a few
//! MiB of resident memory and a slot in the job segment. Asking for more ranks than the
//! machine has pids, processes or memory for used to spawn thousands of ranks before the
//! first `fork` failed, with the machine unusable meanwhile; now the request is refused at
//! once, naming the limit. `--max-ranks N` (see [`allow_ranks`]) is the user's override.

use std::sync::atomic::{AtomicU32, Ordering};

/// Tasks (pids) a rank is counted for: its main thread and its DMA Helper thread.
pub const TASKS_PER_RANK: u64 = 2;

/// Memory a rank is counted for, besides its share of the job segment: a small C rank
/// linked against strobe's libmpi has about 4–6 MiB resident; 8 MiB leaves room for the
/// program's own data without refusing anything a machine could really run.
pub const BYTES_PER_RANK: u64 = 8 << 20;

/// `--max-ranks`: 0 means "check against the machine".
static MAX_RANKS: AtomicU32 = AtomicU32::new(0);

/// Accept jobs of up to `n` ranks without checking the machine's limits (`--max-ranks N`),
/// for the rest of this process. Decision: a process-wide setting rather than a field of
/// `LaunchConfig`, so that every path into the launcher (run, record, replay, the bench
/// tools) honours it without each building it in.
pub fn allow_ranks(n: u32) {
    MAX_RANKS.store(n, Ordering::Relaxed);
}

/// Why a job is refused; the message names the limit and the override.
#[derive(Debug, thiserror::Error)]
#[error("{ranks} ranks are more than this machine can hold: {why}; pass --max-ranks {ranks} to try anyway")]
pub struct TooManyRanks {
    pub ranks: u32,
    pub why: String,
}

#[derive(Debug, thiserror::Error)]
#[error("{ranks} ranks exceed --max-ranks {max}")]
pub struct AboveMaxRanks {
    pub ranks: u32,
    pub max: u32,
}

/// The limits a request for `ranks` ranks is checked against.
#[derive(Clone, Copy, Debug)]
pub struct Machine {
    /// `/proc/sys/kernel/pid_max` minus the tasks that already exist.
    pub free_pids: Option<u64>,
    /// `RLIMIT_NPROC` (soft), when it applies (not for root, not unlimited).
    pub nproc: Option<u64>,
    /// `MemAvailable` from `/proc/meminfo`, in bytes.
    pub mem_available: Option<u64>,
}

impl Machine {
    /// Read the limits now. A value that cannot be read is not checked.
    pub fn current() -> Machine {
        Machine {
            free_pids: free_pids(),
            nproc: nproc_limit(),
            mem_available: mem_available(),
        }
    }

    /// Check `ranks` against these limits; `segment` is the job segment's size in bytes.
    pub fn check(&self, ranks: u32, segment: u64) -> Result<(), TooManyRanks> {
        let tasks = u64::from(ranks) * TASKS_PER_RANK;
        let refuse = |why: String| Err(TooManyRanks { ranks, why });
        if let Some(free) = self.free_pids {
            if tasks > free {
                return refuse(format!(
                    "they need {tasks} pids and pid_max leaves {free} free (/proc/sys/kernel/pid_max)"
                ));
            }
        }
        if let Some(n) = self.nproc {
            if tasks > n {
                return refuse(format!(
                    "they need {tasks} processes and threads and RLIMIT_NPROC (ulimit -u) is {n}"
                ));
            }
        }
        if let Some(avail) = self.mem_available {
            let need = u64::from(ranks)
                .saturating_mul(BYTES_PER_RANK)
                .saturating_add(segment);
            if need > avail {
                return refuse(format!(
                    "they need about {} of memory ({} MiB per rank plus a {} job segment) and MemAvailable is {}",
                    mib(need),
                    BYTES_PER_RANK >> 20,
                    mib(segment),
                    mib(avail)
                ));
            }
        }
        Ok(())
    }
}

fn mib(b: u64) -> String {
    if b >= 10 << 30 {
        format!("{} GiB", b >> 30)
    } else {
        format!("{} MiB", b >> 20)
    }
}

/// Check a request for `ranks` ranks: against `--max-ranks` when it was given, otherwise
/// against the machine.
pub fn check_ranks(ranks: u32) -> Result<(), crate::launcher::LaunchError> {
    use crate::launcher::LaunchError;
    let max = MAX_RANKS.load(Ordering::Relaxed);
    if max != 0 {
        return if ranks > max {
            Err(LaunchError::Limit(AboveMaxRanks { ranks, max }.to_string()))
        } else {
            Ok(())
        };
    }
    let segment = crate::rank::segment_bytes(ranks) as u64;
    Machine::current()
        .check(ranks, segment)
        .map_err(|e| LaunchError::Limit(e.to_string()))
}

fn read_u64(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Free pids: pid_max less the tasks now running (threads use pids too).
fn free_pids() -> Option<u64> {
    let max = read_u64("/proc/sys/kernel/pid_max")?;
    // The fourth field of /proc/loadavg is "running/total tasks".
    let load = std::fs::read_to_string("/proc/loadavg").ok()?;
    let total: u64 = load
        .split_whitespace()
        .nth(3)?
        .split('/')
        .nth(1)?
        .parse()
        .ok()?;
    Some(max.saturating_sub(total))
}

/// The soft `RLIMIT_NPROC`, unless it does not apply (root, or unlimited).
fn nproc_limit() -> Option<u64> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return None;
    }
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut r) } != 0
        || r.rlim_cur == libc::RLIM_INFINITY
    {
        return None;
    }
    Some(r.rlim_cur)
}

fn mem_available() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_limit_is_named() {
        let m = Machine {
            free_pids: Some(1000),
            nproc: Some(300),
            mem_available: Some(2 << 30),
        };
        assert!(m.check(100, 1 << 20).is_ok());
        let e = m.check(600, 0).unwrap_err().to_string();
        assert!(e.contains("pid_max"), "{e}");
        let e = m.check(200, 0).unwrap_err().to_string();
        assert!(e.contains("RLIMIT_NPROC"), "{e}");
        let e = m.check(130, 1 << 30).unwrap_err().to_string();
        assert!(
            e.contains("MemAvailable") && e.contains("--max-ranks 130"),
            "{e}"
        );
    }

    #[test]
    fn this_machine_refuses_a_hundred_thousand_ranks() {
        let e = Machine::current().check(100_000, crate::rank::segment_bytes(100_000) as u64);
        assert!(e.is_err());
    }
}
