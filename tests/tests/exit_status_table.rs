//! Issue 12, "exit statuses documented in one table and consistent across commands": the
//! table in docs/cli.md ("Exit status (every command)") is parsed, and every command is run
//! in its main failure modes; each must end with a status the table lists, in a row that
//! names what happened (a phrase of the row, checked here), so the doc and the code cannot
//! drift apart.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use strobe_tests::{fixture, record_fixture_into, strobe};

/// The table: status ("0", "1", ..., "the job's") to its meaning.
fn table() -> BTreeMap<String, String> {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/cli.md"))
        .expect("docs/cli.md");
    let start = doc
        .find("### Exit status (every command)")
        .expect("docs/cli.md has the exit status table");
    let rows: BTreeMap<String, String> = doc[start..]
        .lines()
        .skip(1)
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2) // the header and the rule
        .filter_map(|l| {
            let l = l.trim().trim_start_matches('|').trim_end_matches('|');
            let (status, meaning) = l.split_once('|')?;
            Some((status.trim().to_string(), meaning.trim().to_string()))
        })
        .collect();
    assert!(rows.len() >= 10, "the table parsed to {rows:?}");
    rows
}

struct Case {
    what: &'static str,
    /// Run through `sh -c` (`$S` is strobe); the status is the script's.
    script: String,
    status: i32,
    /// Phrases the table's row for `status` must contain.
    row_says: &'static [&'static str],
}

fn run(script: &str, dir: &Path) -> (i32, String) {
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .env("S", strobe())
        .current_dir(dir)
        .env_remove("STROBE_SCHEDULE_LOG")
        .env_remove("STROBE_METRICS")
        .output()
        .expect("sh");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_command_exits_as_the_table_in_docs_cli_md_says() {
    let table = table();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ring = record_fixture_into(d, "token_ring", 3);
    let ring2 = d.join("ring2.db");
    let diverging = record_fixture_into(d, "heisenbug", 3);
    std::fs::copy(&ring, &ring2).unwrap();
    std::fs::write(d.join("notes.txt"), "not a recording\n").unwrap();
    let fx = |n: &str| fixture(n).display().to_string();
    let (ring, diverging) = (ring.display(), diverging.display());
    let cases = vec![
        Case {
            what: "run: success",
            script: format!("$S run -n 2 -- {}", fx("hello")),
            status: 0,
            row_says: &["success"],
        },
        Case {
            what: "run: not an MPI program",
            script: "$S run -n 2 -- /bin/true".into(),
            status: 1,
            row_says: &["without calling `MPI_Init`"],
        },
        Case {
            what: "run: exits without MPI_Finalize",
            script: format!("$S run -n 2 -- {}", fx("noexit_finalize")),
            status: 1,
            row_says: &["without calling `MPI_Finalize`"],
        },
        Case {
            what: "run: -n 0",
            script: "$S run -n 0 -- /bin/true".into(),
            status: 2,
            row_says: &["`-n 0`"],
        },
        Case {
            what: "run: an unknown option",
            script: "$S run --no-such-option -n 2 -- /bin/true".into(),
            status: 2,
            row_says: &["usage errors"],
        },
        Case {
            what: "run: deadlock",
            script: format!("$S run -n 3 -- {}", fx("deadlock")),
            status: 3,
            row_says: &["deadlock", "wait-for cycle"],
        },
        Case {
            what: "run: timeout",
            script: format!("$S run -n 2 --timeout 1s -- {} 60000", fx("idle")),
            status: 124,
            row_says: &["--timeout"],
        },
        Case {
            what: "run: missing program",
            script: "$S run -n 2 -- /nonexistent/program".into(),
            status: 127,
            row_says: &["does not exist"],
        },
        Case {
            what: "run: a directory as the program",
            script: "$S run -n 2 -- /tmp".into(),
            status: 127,
            row_says: &["a directory"],
        },
        Case {
            what: "run: a rank killed by SIGABRT",
            script: format!("$S run -n 2 -- {}", fx("crash")),
            status: 134,
            row_says: &["128+signal"],
        },
        Case {
            what: "run: MPI_Abort(3)",
            script: format!("$S run -n 3 -- {}", fx("abort")),
            status: 3,
            row_says: &[],
        },
        Case {
            what: "record: existing file without --force",
            script: format!("$S record -o {ring} -n 2 -- {}", fx("hello")),
            status: 2,
            row_says: &["without `--force`"],
        },
        Case {
            what: "record: output is a directory",
            script: format!("$S record -o /tmp -n 2 -- {}", fx("hello")),
            status: 2,
            row_says: &["a directory"],
        },
        Case {
            what: "replay: matched",
            script: format!("$S replay {ring} >/dev/null"),
            status: 0,
            row_says: &["matched"],
        },
        Case {
            what: "replay: not a recording",
            script: "$S replay notes.txt".into(),
            status: 2,
            row_says: &["not a recording"],
        },
        Case {
            what: "replay: a breakpoint that can never fire",
            script: format!("$S replay {ring} --until-slice 99999999"),
            status: 2,
            row_says: &["never fire"],
        },
        Case {
            what: "replay: --gdb-command alone",
            script: format!("$S replay {ring} --gdb-command 'gdb -p {{pid}}'"),
            status: 2,
            row_says: &["--gdb-command"],
        },
        Case {
            what: "stats: not a recording",
            script: "$S stats notes.txt".into(),
            status: 2,
            row_says: &["`stats`"],
        },
        Case {
            what: "tui: not a recording",
            script: "$S tui notes.txt".into(),
            status: 2,
            row_says: &["`tui`"],
        },
        Case {
            what: "tui: no terminal",
            script: format!("$S tui {ring} </dev/null >/dev/null"),
            status: 2,
            row_says: &["`tui` without a terminal"],
        },
        Case {
            what: "tui --diff: cannot compare",
            script: format!("$S tui {ring} --diff notes.txt"),
            status: 2,
            row_says: &["`tui --diff`"],
        },
        Case {
            what: "diff: the same run",
            script: format!("$S diff {ring} ring2.db >/dev/null"),
            status: 0,
            row_says: &["`diff`: no difference"],
        },
        Case {
            what: "diff: different programs cannot be compared",
            script: format!("$S diff {ring} {diverging} >/dev/null"),
            status: 2,
            row_says: &["`diff`", "cannot compare"],
        },
        Case {
            what: "export: not a recording",
            script: "$S export notes.txt -o out.json".into(),
            status: 2,
            row_says: &["`export`"],
        },
        Case {
            what: "explore: not a recording",
            script: "$S explore notes.txt -o found.db".into(),
            status: 2,
            row_says: &["`explore`"],
        },
        Case {
            what: "hunt: --runs 0",
            script: format!("$S hunt -o h.db --runs 0 -n 2 -- {}", fx("hello")),
            status: 2,
            row_says: &["`hunt --runs 0`"],
        },
    ];
    let mut failures = Vec::new();
    for c in &cases {
        let (status, stderr) = run(&c.script, d);
        // A job's own status (128+signal, an MPI_Abort code) is the table's "the job's" row.
        let key = if c.what.contains("killed") || c.what.contains("MPI_Abort") {
            "the job's".to_string()
        } else {
            c.status.to_string()
        };
        let Some(row) = table.get(&key) else {
            failures.push(format!("{}: status {key} is not in the table", c.what));
            continue;
        };
        if status != c.status {
            failures.push(format!(
                "{}: exit {status}, the table says {} ({row}); stderr: {stderr}",
                c.what, c.status
            ));
            continue;
        }
        for phrase in c.row_says {
            if !row.contains(phrase) {
                failures.push(format!(
                    "{}: the table's row for {key} does not say {phrase:?}: {row}",
                    c.what
                ));
            }
        }
    }
    // `strobe demo | head`: strobe's own status (bash's PIPESTATUS), 141 in the table.
    let out = Command::new("bash")
        .arg("-c")
        .arg("\"$S\" demo | head -c 1 >/dev/null; exit ${PIPESTATUS[0]}")
        .env("S", strobe())
        .current_dir(d)
        .output()
        .expect("bash");
    let status = out.status.code().unwrap_or(-1);
    if status != 141 && status != 0 {
        failures.push(format!("demo | head: exit {status}"));
    }
    if status == 141 && !table["141"].contains("demo") {
        failures.push("the table's row for 141 does not name demo".into());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
