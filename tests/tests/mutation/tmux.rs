//! The terminal UI of the mutation corpus in a real terminal: `strobe tui FILE` (the real
//! binary) in a tmux pane, keys typed through every tab, `q`, and the terminal checked
//! after it exits (issue 11: "tui in tmux"). What fails a mutant: no exit within the limit
//! (a hang), "panicked" on the pane or in its stderr or exit 101, an impossible value on
//! the screen, the terminal left in the alternate screen or with other `stty` settings.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use super::{impossible_screen, Verdict};

/// One tmux server (its own socket) for a whole corpus run; a session per mutant.
pub struct Server {
    socket: String,
    next: u64,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// The keys typed once the first frame is up: every tab, a move, a zoom.
const KEYS: &[&str] = &["1", "]", "2", "j", "l", "3", "4", "1"];

impl Server {
    pub fn new() -> Server {
        let v = Command::new("tmux").arg("-V").output();
        assert!(
            v.is_ok_and(|o| o.status.success()),
            "tmux is not installed: scripts/ensure-tools.sh installs it"
        );
        let server = Server {
            socket: format!("strobe-mutation-{}", std::process::id()),
            next: 0,
        };
        // A session that lives as long as the server: tmux exits with its last session,
        // and a new session started while it exits fails ("server exited unexpectedly").
        let out = server.run(&["new-session", "-d", "-s", "keep", "sleep 86400"]);
        assert!(out.status.success(), "tmux new-session: {out:?}");
        server
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .env("TERM", "xterm-256color")
            .output()
            .expect("run tmux")
    }

    fn capture(&self, s: &str) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", s]).stdout).into_owned()
    }

    /// `strobe tui path` in a fresh 120x40 pane; `scratch` holds the pane's files.
    pub fn tui(
        &mut self,
        strobe: &Path,
        path: &Path,
        scratch: &Path,
        limit: Duration,
    ) -> (Verdict, String) {
        self.next += 1;
        let s = format!("m{}", self.next);
        let f = |name: &str| scratch.join(format!("{s}.{name}")).display().to_string();
        let (before, after, err, code) = (f("before"), f("after"), f("err"), f("code"));
        // The shell records the terminal's settings, runs the UI, then records its exit
        // status and the settings again; the pane stays (sleep) to be read.
        let cmd = format!(
            "stty -g > '{before}'; '{}' tui '{}' 2> '{err}'; echo $? > '{code}.tmp'; \
             stty -g > '{after}'; mv '{code}.tmp' '{code}'; sleep 120",
            strobe.display(),
            path.display()
        );
        let out = self.run(&["new-session", "-d", "-s", &s, "-x", "120", "-y", "40", &cmd]);
        assert!(out.status.success(), "tmux new-session: {out:?}");
        let verdict = self.drive(&s, &code, &err, limit);
        let verdict = verdict.unwrap_or_else(|| self.judge(&s, &before, &after, &err, &code));
        let _ = self.run(&["kill-session", "-t", &s]);
        verdict
    }

    /// Wait for the first frame (or an early exit), type the keys, quit. `Some` for a
    /// verdict reached here: a hang, or an impossible value on a screen.
    fn drive(&self, s: &str, code: &str, err: &str, limit: Duration) -> Option<(Verdict, String)> {
        let deadline = Instant::now() + limit;
        let exited = || Path::new(code).exists();
        while !exited() && self.capture(s).trim().is_empty() {
            if Instant::now() > deadline {
                return Some((Verdict::Hang, "no first frame".into()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut impossible = None;
        if !exited() {
            for k in KEYS {
                let _ = self.run(&["send-keys", "-t", s, k]);
                std::thread::sleep(Duration::from_millis(40));
                if impossible.is_none() {
                    impossible = impossible_screen(&self.capture(s));
                }
            }
            let _ = self.run(&["send-keys", "-t", s, "q"]);
        }
        while !exited() {
            if Instant::now() > deadline {
                let screen = self.capture(s);
                let e = std::fs::read_to_string(err).unwrap_or_default();
                if e.contains("panicked") || screen.contains("panicked") {
                    return Some((Verdict::Panic, e));
                }
                return Some((Verdict::Hang, "no exit after q".into()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        impossible.map(|b| (Verdict::Impossible, b))
    }

    fn judge(
        &self,
        s: &str,
        before: &str,
        after: &str,
        err: &str,
        code: &str,
    ) -> (Verdict, String) {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let e = read(err);
        let code: Option<i32> = read(code).trim().parse().ok();
        let screen = self.capture(s);
        if code == Some(101) || e.contains("panicked") || screen.contains("panicked") {
            return (Verdict::Panic, e);
        }
        let alternate = self.run(&["display-message", "-p", "-t", s, "#{alternate_on}"]);
        if String::from_utf8_lossy(&alternate.stdout).trim() != "0" {
            return (
                Verdict::Other,
                "left the terminal in the alternate screen".into(),
            );
        }
        if read(before) != read(after) || read(before).is_empty() {
            return (
                Verdict::Other,
                "did not restore the terminal's settings".into(),
            );
        }
        match code {
            Some(0) => (Verdict::Ok, String::new()),
            Some(2) if e.contains("damaged recording") || e.contains("not a strobe recording") => {
                (Verdict::Refused, String::new())
            }
            _ => (Verdict::Other, format!("exit {code:?}: {e}")),
        }
    }
}
