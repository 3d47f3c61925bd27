//! The crate graph and the purity of `strobe-core`, checked on the source tree (docs/
//! architecture.md, "Crates"). Crates point one way:
//! core ← schema ← runtime ← (strobe-mpi, recorder) ← replayer ← tui ← strobe ← strobe-bench.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The `strobe*` crates a manifest depends on (normal dependencies; dev-dependencies may
/// reach further down for tests but never up).
fn strobe_deps(manifest: &Path, table: &str) -> Vec<String> {
    let text = std::fs::read_to_string(manifest).expect("read manifest");
    let doc: toml::Table = toml::from_str(&text).expect("parse manifest");
    doc.get(table)
        .and_then(|t| t.as_table())
        .map(|t| {
            t.keys()
                .filter(|k| k.starts_with("strobe"))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// Each crate's level: a crate may depend only on crates of a lower level.
fn levels() -> BTreeMap<&'static str, (u32, &'static str)> {
    BTreeMap::from([
        ("strobe-core", (0, "core")),
        ("strobe-schema", (1, "schema")),
        ("strobe-runtime", (2, "runtime")),
        ("strobe-mpi", (3, "runtime/capi")),
        ("strobe-recorder", (3, "recorder")),
        ("strobe-replayer", (4, "replayer")),
        ("strobe-tui", (5, "tui")),
        ("strobe", (6, ".")),
        ("strobe-bench", (7, "bench")),
    ])
}

#[test]
fn crates_point_one_way() {
    let levels = levels();
    let mut wrong = Vec::new();
    for (name, (level, dir)) in &levels {
        let manifest = root().join(dir).join("Cargo.toml");
        for table in ["dependencies", "build-dependencies"] {
            for dep in strobe_deps(&manifest, table) {
                match levels.get(dep.as_str()) {
                    Some((l, _)) if l < level => {}
                    Some(_) => wrong.push(format!("{name} depends on {dep} ({table})")),
                    None => wrong.push(format!("{name} depends on unknown crate {dep}")),
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "the crate graph points the wrong way: {wrong:?}"
    );
    // The runtime never depends on the recorder or anything above it, even for tests:
    // decisions flow out through sinks and in through sources.
    let runtime_dev = strobe_deps(&root().join("runtime/Cargo.toml"), "dev-dependencies");
    assert!(
        runtime_dev
            .iter()
            .all(|d| d == "strobe-core" || d == "strobe-schema"),
        "runtime dev-dependencies reach up: {runtime_dev:?}"
    );
}

#[test]
fn core_depends_on_nothing_with_io() {
    let text = std::fs::read_to_string(root().join("core/Cargo.toml")).unwrap();
    let doc: toml::Table = toml::from_str(&text).unwrap();
    let deps: Vec<&String> = doc
        .get("dependencies")
        .and_then(|t| t.as_table())
        .map(|t| t.keys().collect())
        .unwrap_or_default();
    let allowed = ["thiserror"];
    let extra: Vec<_> = deps
        .iter()
        .filter(|d| !allowed.contains(&d.as_str()))
        .collect();
    assert!(
        extra.is_empty(),
        "strobe-core may only depend on {allowed:?}, found {extra:?}"
    );
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// What `strobe-core` must never name: it is a pure function of its inputs, so it needs no
/// libc, no unsafe code, no clock, no files, sockets, processes or threads.
const FORBIDDEN_IN_CORE: &[&str] = &[
    "unsafe",
    "libc",
    "std::time",
    "Instant",
    "SystemTime",
    "std::fs",
    "std::net",
    "std::process",
    "std::thread",
    "std::env",
    "std::io",
    "std::sync",
    "HashMap",
    "HashSet",
];

#[test]
fn core_is_pure() {
    let mut files = Vec::new();
    rust_files(&root().join("core/src"), &mut files);
    assert!(files.len() > 5, "core/src not found");
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if code.trim() == "#![forbid(unsafe_code)]" {
                continue;
            }
            for word in FORBIDDEN_IN_CORE {
                if code.contains(word) {
                    found.push(format!("{}:{}: {word}", f.display(), i + 1));
                }
            }
        }
    }
    assert!(found.is_empty(), "strobe-core must stay pure: {found:#?}");
    let lib = std::fs::read_to_string(root().join("core/src/lib.rs")).unwrap();
    assert!(lib.contains("#![forbid(unsafe_code)]"));
}
