//! `x` in a live replay: start a debugger attached to the selected rank while the replay is
//! held, as `strobe replay --gdb RANK` does (`src/replay/gdb.rs`): inside tmux in a new
//! window (the UI keeps running beside it), otherwise in the foreground: the UI gives the
//! terminal back, the debugger runs, and the UI returns when it exits.
//!
//! Decision: unlike `strobe replay --gdb`, where the replay ends when a foreground gdb
//! exits, the TUI's replay stays held after the debugger exits (gdb detaches on quit): the
//! user can step on, set breakpoints, or press `x` again.
//!
//! The command comes from the binary (`--gdb-command`, else `$STROBE_GDB`, else
//! `gdb -p {pid}`); `{pid}` and `{rank}` are replaced here, and `sh -c` runs it.

use std::process::{Command, ExitStatus};

/// The debugger command when the binary passes none.
pub const DEFAULT_COMMAND: &str = "gdb -p {pid}";

/// A debugger to start, asked for by `x` (queued by the app, started by the event loop,
/// which owns the terminal).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DebuggerRequest {
    pub rank: u32,
    pub pid: u32,
    /// The shell command, `{pid}` and `{rank}` replaced.
    pub command: String,
    /// The slice the replay is held before (for the messages).
    pub slice: u64,
}

/// The shell command for one rank: `{pid}` and `{rank}` replaced in `template`.
pub fn command_for(template: &str, pid: u32, rank: u32) -> String {
    template
        .replace("{pid}", &pid.to_string())
        .replace("{rank}", &rank.to_string())
}

/// Whether this process runs inside tmux (`$TMUX` set and not empty).
pub fn in_tmux() -> bool {
    std::env::var_os("TMUX").is_some_and(|t| !t.is_empty())
}

/// Inside tmux: the debugger in a new window named `gdb rank N`; returns at once with the
/// line for the status bar.
pub fn start_in_tmux(req: &DebuggerRequest) -> Result<String, String> {
    let name = format!("gdb rank {}", req.rank);
    let st = Command::new("tmux")
        .args(["new-window", "-n", &name, &req.command])
        .status()
        .map_err(|e| {
            format!(
                "running tmux new-window: {e}; attach by hand: {}",
                req.command
            )
        })?;
    if !st.success() {
        return Err(format!(
            "tmux new-window failed ({st}); attach by hand: {}",
            req.command
        ));
    }
    Ok(format!(
        "gdb on rank {} (pid {}) in tmux window \"{name}\"; the replay stays held",
        req.rank, req.pid
    ))
}

/// In the foreground: run the debugger on this terminal until it exits. The caller has
/// given the terminal back (raw mode off, the main screen).
pub fn run_foreground(req: &DebuggerRequest) -> std::io::Result<ExitStatus> {
    eprintln!(
        "strobe: gdb on rank {} (pid {}): {}; the replay stays held before slice {}; quitting gdb returns to strobe",
        req.rank, req.pid, req.command, req.slice
    );
    Command::new("sh").args(["-c", &req.command]).status()
}

/// The status line after a foreground debugger exited.
pub fn foreground_done(req: &DebuggerRequest, st: std::io::Result<ExitStatus>) -> (String, bool) {
    match st {
        Ok(s) if s.success() => (
            format!(
                "gdb on rank {} exited; still held before slice {}",
                req.rank, req.slice
            ),
            false,
        ),
        Ok(s) => (
            format!(
                "the debugger exited with {s}; the replay is still held before slice {}",
                req.slice
            ),
            true,
        ),
        Err(e) => (format!("running {}: {e}", req.command), true),
    }
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
    }
}
