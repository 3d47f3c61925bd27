//! Host lists: `--hosts h1,h2:4` and `--hostfile FILE`, in the formats mpirun users know.
//!
//! One host per line, `#` starts a comment, blank lines are skipped. A line is `host`,
//! `host:N` (MPICH's Hydra) or `host slots=N` (Open MPI; `max_slots=M`/`max-slots=M` is
//! accepted and ignored: strobe never places more than `slots` unless oversubscription is
//! allowed, see [`super::placement`]). A host named on several lines is **one** host (one
//! daemon per host) whose slots add up, a line without a count counting 1, as both
//! mpirun's do. Host names are DNS names or IPv4 addresses (`[A-Za-z0-9._-]`, not starting
//! with `-`); IPv6 literals are not accepted (`:` separates the slot count).

use std::path::Path;

/// One host of the job and, when the list says so, how many ranks it takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    pub name: String,
    pub slots: Option<u32>,
}

impl Host {
    pub fn new(name: &str, slots: Option<u32>) -> Host {
        Host {
            name: name.to_string(),
            slots,
        }
    }
}

/// A host list that cannot be used, with where.
#[derive(Debug, thiserror::Error)]
pub enum HostfileError {
    #[error("cannot read the hostfile {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{origin}:{line}: {reason}")]
    Line {
        origin: String,
        line: usize,
        reason: String,
    },
    #[error("{0}: no host in it")]
    Empty(String),
}

/// Reads and parses a hostfile.
pub fn read_hostfile(path: &Path) -> Result<Vec<Host>, HostfileError> {
    let text = std::fs::read_to_string(path).map_err(|source| HostfileError::Read {
        path: path.display().to_string(),
        source,
    })?;
    parse_hostfile(&text, &path.display().to_string())
}

/// Parses a hostfile's text; `origin` names it in errors (its path).
pub fn parse_hostfile(text: &str, origin: &str) -> Result<Vec<Host>, HostfileError> {
    let mut hosts = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let host = parse_line(line).map_err(|reason| HostfileError::Line {
            origin: origin.to_string(),
            line: index + 1,
            reason,
        })?;
        add(&mut hosts, host);
    }
    if hosts.is_empty() {
        return Err(HostfileError::Empty(origin.to_string()));
    }
    Ok(hosts)
}

/// Parses `--hosts h1,h2:4,h3` (the same `host[:N]` entries, comma-separated).
pub fn parse_host_list(list: &str) -> Result<Vec<Host>, HostfileError> {
    let mut hosts = Vec::new();
    for (index, entry) in list.split(',').enumerate() {
        let entry = entry.trim();
        let host = if entry.contains(char::is_whitespace) {
            Err(format!("{entry:?}: spaces are not allowed in --hosts"))
        } else {
            parse_line(entry)
        };
        let host = host.map_err(|reason| HostfileError::Line {
            origin: "--hosts".to_string(),
            line: index + 1,
            reason: format!("entry {}: {reason}", index + 1),
        })?;
        add(&mut hosts, host);
    }
    Ok(hosts)
}

/// The names, in order (what a [`super::Launcher`] takes).
pub fn host_names(hosts: &[Host]) -> Vec<String> {
    hosts.iter().map(|h| h.name.clone()).collect()
}

fn add(hosts: &mut Vec<Host>, host: Host) {
    match hosts.iter_mut().find(|h| h.name == host.name) {
        Some(known) => {
            known.slots = Some(known.slots.unwrap_or(1) + host.slots.unwrap_or(1));
        }
        None => hosts.push(host),
    }
}

fn parse_line(line: &str) -> Result<Host, String> {
    let mut words = line.split_whitespace();
    let first = words.next().ok_or("no host")?;
    let (name, mut slots) = match first.split_once(':') {
        Some((name, count)) => (name, Some(parse_slots(count)?)),
        None => (first, None),
    };
    check_name(name)?;
    for word in words {
        match word.split_once('=') {
            Some(("slots", count)) if slots.is_none() => slots = Some(parse_slots(count)?),
            Some(("slots", _)) => return Err(format!("{name}: the slot count is given twice")),
            Some(("max_slots" | "max-slots", count)) => {
                parse_slots(count)?;
            }
            _ => return Err(format!("unexpected {word:?} (expected slots=N)")),
        }
    }
    Ok(Host::new(name, slots))
}

fn parse_slots(count: &str) -> Result<u32, String> {
    match count.parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!(
            "{count:?} is not a slot count (a whole number, 1 or more)"
        )),
    }
}

fn check_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if valid {
        Ok(())
    } else {
        Err(format!("{name:?} is not a host name"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mpich_and_open_mpi_forms() {
        let text = "# cluster\n\
                    node1:4\n\
                    \n\
                    node2 slots=2 max_slots=8   # Open MPI\n\
                    10.0.0.3\n\
                    node1:2\n";
        let hosts = parse_hostfile(text, "hf").unwrap();
        assert_eq!(
            hosts,
            [
                Host::new("node1", Some(6)),
                Host::new("node2", Some(2)),
                Host::new("10.0.0.3", None)
            ]
        );
    }

    #[test]
    fn repeated_host_without_counts_adds_slots() {
        let hosts = parse_hostfile("a\nb\na\n", "hf").unwrap();
        assert_eq!(hosts, [Host::new("a", Some(2)), Host::new("b", None)]);
    }

    #[test]
    fn errors_name_the_line() {
        let cases = [
            ("a\nb:0\n", 2, "slot count"),
            ("a\n\n# x\nb:x\n", 4, "slot count"),
            ("a slots=2 slots=3\n", 1, "twice"),
            ("a:2 slots=3\n", 1, "twice"),
            ("a cpus=4\n", 1, "unexpected"),
            ("-oProxyCommand=x\n", 1, "not a host name"),
            ("a\nfe80::1\n", 2, "slot count"),
            ("a/b\n", 1, "not a host name"),
        ];
        for (text, line, what) in cases {
            let err = parse_hostfile(text, "hf").unwrap_err().to_string();
            assert!(err.starts_with(&format!("hf:{line}: ")), "{text:?}: {err}");
            assert!(err.contains(what), "{text:?}: {err}");
        }
    }

    #[test]
    fn empty_file_is_an_error() {
        let err = parse_hostfile("# nothing\n\n", "hf").unwrap_err();
        assert!(matches!(err, HostfileError::Empty(_)), "{err}");
        let missing = read_hostfile(Path::new("/nonexistent/hosts")).unwrap_err();
        assert!(missing.to_string().contains("/nonexistent/hosts"));
    }

    #[test]
    fn host_list_option() {
        let hosts = parse_host_list("h1,h2:3, h3").unwrap();
        assert_eq!(
            hosts,
            [
                Host::new("h1", None),
                Host::new("h2", Some(3)),
                Host::new("h3", None)
            ]
        );
        assert_eq!(host_names(&hosts), ["h1", "h2", "h3"]);
        let err = parse_host_list("h1,,h2").unwrap_err().to_string();
        assert!(err.contains("entry 2"), "{err}");
    }
}
