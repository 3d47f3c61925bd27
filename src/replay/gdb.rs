//! `strobe replay --gdb RANK`: once the replay stops (a held failure, `--until-slice`, a
//! breakpoint), start gdb attached to that rank: in a new tmux window inside tmux, else in
//! the foreground (strobe waits for gdb, then ends the job). docs/replay-control.md.

use std::process::Command;

use anyhow::{bail, Context, Result};
use strobe_replayer::Pause;

/// The debugger command when neither `--gdb-command` nor `$STROBE_GDB` names one.
pub const DEFAULT_COMMAND: &str = "gdb -p {pid}";
/// The environment variable that overrides the debugger command (below `--gdb-command`).
pub const ENV_COMMAND: &str = "STROBE_GDB";

/// The command template: `--gdb-command`, else `$STROBE_GDB`, else `gdb -p {pid}`.
pub fn template(flag: Option<&str>) -> String {
    flag.map(str::to_string)
        .or_else(|| {
            std::env::var(ENV_COMMAND)
                .ok()
                .filter(|s| !s.trim().is_empty())
        })
        .unwrap_or_else(|| DEFAULT_COMMAND.to_string())
}

/// The shell command for one rank: `{pid}` and `{rank}` replaced.
pub fn command_for(template: &str, pid: u32, rank: u32) -> String {
    template
        .replace("{pid}", &pid.to_string())
        .replace("{rank}", &rank.to_string())
}

/// Whether this process has CAP_SYS_PTRACE (bit 19 of CapEff in /proc/self/status).
fn has_cap_sys_ptrace() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 19) != 0)
}

/// What Yama (`/proc/sys/kernel/yama/ptrace_scope`) lets a debugger do: `Ok(None)` when it
/// can attach, `Ok(Some(warning))` when it may not (scope 2: only a tracer with
/// CAP_SYS_PTRACE, which gdb may have by `setcap`), `Err` when it never can (scope 3).
/// Scope 1 is fine: ranks of a replay that can hold allow any process of the user to
/// attach (`PR_SET_PTRACER_ANY`, see the replayer's `safety::rank_env`).
pub fn ptrace_check() -> Result<Option<String>> {
    let Ok(scope) = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope") else {
        return Ok(None); // no Yama: the classic rule (same user) applies
    };
    match scope.trim() {
        "2" if !has_cap_sys_ptrace() => Ok(Some(
            "kernel.yama.ptrace_scope is 2: only a debugger with CAP_SYS_PTRACE can attach; \
             if gdb fails with \"ptrace: Operation not permitted\", run it as root, give it the \
             capability (sudo setcap cap_sys_ptrace+ep $(command -v gdb)), or lower the scope \
             (sudo sysctl kernel.yama.ptrace_scope=1)"
                .into(),
        )),
        "3" => bail!(
            "kernel.yama.ptrace_scope is 3: no debugger may attach to any process until the \
             next reboot (the setting cannot be lowered at run time); reboot with \
             kernel.yama.ptrace_scope=1, or debug from the recording (strobe tui)"
        ),
        _ => Ok(None),
    }
}

/// Start the debugger on `rank` of the held replay `pause`. Inside tmux: a new window, and
/// this returns at once. Otherwise: in the foreground, returning when the debugger exits.
pub fn start(template: &str, rank: u32, pause: &Pause) -> Result<()> {
    let Some(view) = pause.ranks.iter().find(|r| r.rank == rank) else {
        bail!("rank {rank} is not in this job");
    };
    if view.pid == 0 || view.state == "exited" {
        bail!("rank {rank} has exited: there is no process to attach to");
    }
    start_pid(template, rank, view.pid)
}

/// Start the debugger on `pid` (rank `rank`): in a tmux window inside tmux, else in the
/// foreground until it exits.
pub fn start_pid(template: &str, rank: u32, pid: u32) -> Result<()> {
    let cmd = command_for(template, pid, rank);
    let in_tmux = std::env::var_os("TMUX").is_some_and(|t| !t.is_empty());
    if in_tmux {
        eprintln!(
            "strobe: gdb on rank {rank} (pid {pid}) in tmux window \"gdb rank {rank}\": {cmd}"
        );
        let st = Command::new("tmux")
            .args(["new-window", "-n", &format!("gdb rank {rank}"), &cmd])
            .status()
            .context("running tmux new-window")?;
        if !st.success() {
            bail!("tmux new-window failed ({st}); attach by hand: {cmd}");
        }
        eprintln!(
            "strobe: the replay stays held: continue or quit from here (or the control socket), or press Ctrl-C to end it"
        );
        return Ok(());
    }
    eprintln!("strobe: gdb on rank {rank} (pid {pid}): {cmd}; the replay ends when gdb exits");
    let st = Command::new("sh")
        .args(["-c", &cmd])
        .status()
        .with_context(|| format!("running {cmd}"))?;
    if !st.success() {
        eprintln!("strobe: the debugger exited with {st}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_name_the_pid_and_rank() {
        assert_eq!(command_for(DEFAULT_COMMAND, 4242, 1), "gdb -p 4242");
        assert_eq!(
            command_for("gdb -batch -ex bt -p {pid} > bt.{rank}", 7, 3),
            "gdb -batch -ex bt -p 7 > bt.3"
        );
        assert_eq!(template(Some("lldb -p {pid}")), "lldb -p {pid}");
    }
}
