//! A PMI-1 client: the wire protocol MPICH's Hydra (and any PMI-1 launcher) speaks to the
//! processes it starts, so `strobe node` daemons started by `mpiexec` find each other
//! through the launcher's key-value space, as MPI libraries do.
//!
//! The launcher hands each process a connected socket (`PMI_FD`, or `PMI_PORT=host:port`)
//! and its place (`PMI_RANK`, `PMI_SIZE`). Commands are one line each, `cmd=NAME` then
//! `key=value` words separated by spaces, answered by one line:
//!
//! | request | reply |
//! |---|---|
//! | `cmd=init pmi_version=1 pmi_subversion=1` | `cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0` |
//! | `cmd=get_maxes` | `cmd=maxes kvsname_max=N keylen_max=N vallen_max=N` |
//! | `cmd=get_my_kvsname` | `cmd=my_kvsname kvsname=NAME` |
//! | `cmd=put kvsname=NAME key=K value=V` | `cmd=put_result rc=0` |
//! | `cmd=barrier_in` | `cmd=barrier_out` (once every process entered) |
//! | `cmd=get kvsname=NAME key=K` | `cmd=get_result rc=0 value=V` (rc≠0: no such key) |
//! | `cmd=finalize` | `cmd=finalize_ack` |
//!
//! Replies may carry more words (`msg=success`); they are ignored. PMI-1 has no fence: a
//! [`Pmi::fence`] is a barrier, after which every `put` made before it is visible to
//! every `get` (PMI-1 puts are committed by the barrier). Keys and values cannot hold
//! spaces, `=` (keys) or newlines: [`Pmi::put`] refuses them.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::net::TcpStream;
use std::os::fd::{FromRawFd, RawFd};

/// A PMI-1 failure.
#[derive(Debug, thiserror::Error)]
pub enum PmiError {
    #[error("PMI: {0}")]
    Io(#[from] io::Error),
    #[error("PMI: {var} is {value:?}, not {what}")]
    BadEnv {
        var: &'static str,
        value: String,
        what: &'static str,
    },
    #[error("PMI: expected a reply `cmd={expected}`, got {got:?}")]
    Protocol { expected: &'static str, got: String },
    #[error("PMI: {cmd} failed (rc={rc}): {line:?}")]
    Failed {
        cmd: &'static str,
        rc: i64,
        line: String,
    },
    #[error("PMI: no value for key {0:?} (was it put before the fence?)")]
    NotFound(String),
    #[error(
        "PMI: {0:?} cannot be sent (spaces, '=', newlines; or longer than the launcher allows)"
    )]
    BadWord(String),
}

/// One reply line: its `cmd` and its other `key=value` words.
#[derive(Debug, PartialEq, Eq)]
pub struct Reply {
    pub cmd: String,
    pub fields: HashMap<String, String>,
}

impl Reply {
    /// Parses `cmd=NAME k=v ...`; words without `=` are kept with an empty value.
    pub fn parse(line: &str) -> Option<Reply> {
        let mut fields: HashMap<String, String> = line
            .split_whitespace()
            .map(|w| match w.split_once('=') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => (w.to_string(), String::new()),
            })
            .collect();
        let cmd = fields.remove("cmd")?;
        Some(Reply { cmd, fields })
    }

    fn rc(&self) -> i64 {
        self.fields
            .get("rc")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }
}

/// A connected PMI-1 client (one per process; finalized when dropped).
pub struct Pmi {
    reader: BufReader<Box<dyn io::Read + Send>>,
    writer: Box<dyn Write + Send>,
    rank: u32,
    size: u32,
    kvsname: String,
    key_max: usize,
    value_max: usize,
    finalized: bool,
}

impl std::fmt::Debug for Pmi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pmi")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("kvsname", &self.kvsname)
            .finish()
    }
}

fn env_number(var: &'static str) -> Result<Option<u32>, PmiError> {
    match std::env::var(var) {
        Err(_) => Ok(None),
        Ok(value) => value
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| PmiError::BadEnv {
                var,
                value,
                what: "a number",
            }),
    }
}

impl Pmi {
    /// Connects when this process was started by a PMI-1 launcher (`PMI_FD` or
    /// `PMI_PORT`, with `PMI_RANK` and `PMI_SIZE`), initializes and learns the key-value
    /// space. `Ok(None)`: not started by one. The PMI socket is made close-on-exec, so
    /// the ranks a daemon starts do not inherit it.
    pub fn from_env() -> Result<Option<Pmi>, PmiError> {
        let (Some(rank), Some(size)) = (env_number("PMI_RANK")?, env_number("PMI_SIZE")?) else {
            return Ok(None);
        };
        let (reader, writer): (Box<dyn io::Read + Send>, Box<dyn Write + Send>) =
            if let Some(fd) = env_number("PMI_FD")? {
                let fd = fd as RawFd;
                // Refuse what is not an open descriptor before taking ownership of it.
                rustix::io::fcntl_getfd(unsafe_borrow(fd)).map_err(io::Error::from)?;
                // SAFETY: the launcher passed us this descriptor for our exclusive use
                // (PMI_FD), it is open (checked above), and nothing else in this process
                // owns it: `from_env` is called once, by the daemon, at its start.
                let file = unsafe { File::from_raw_fd(fd) };
                rustix::io::fcntl_setfd(&file, rustix::io::FdFlags::CLOEXEC)
                    .map_err(io::Error::from)?;
                (Box::new(file.try_clone()?), Box::new(file))
            } else if let Ok(port) = std::env::var("PMI_PORT") {
                let stream = TcpStream::connect(port.trim())?;
                (Box::new(stream.try_clone()?), Box::new(stream))
            } else {
                return Ok(None);
            };
        Pmi::connect(reader, writer, rank, size).map(Some)
    }

    /// Speaks PMI-1 over an already connected pair (`from_env` and tests).
    pub fn connect(
        reader: Box<dyn io::Read + Send>,
        writer: Box<dyn Write + Send>,
        rank: u32,
        size: u32,
    ) -> Result<Pmi, PmiError> {
        let mut pmi = Pmi {
            reader: BufReader::new(reader),
            writer,
            rank,
            size,
            kvsname: String::new(),
            key_max: 64,
            value_max: 256,
            finalized: false,
        };
        let init = pmi.call(
            "cmd=init pmi_version=1 pmi_subversion=1",
            "response_to_init",
        )?;
        pmi.check_rc(&init, "init")?;
        let maxes = pmi.call("cmd=get_maxes", "maxes")?;
        let field = |name: &str, default: usize| {
            maxes
                .fields
                .get(name)
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        pmi.key_max = field("keylen_max", pmi.key_max);
        pmi.value_max = field("vallen_max", pmi.value_max);
        let name = pmi.call("cmd=get_my_kvsname", "my_kvsname")?;
        pmi.kvsname = name.fields.get("kvsname").cloned().unwrap_or_default();
        Ok(pmi)
    }

    pub fn rank(&self) -> u32 {
        self.rank
    }

    pub fn size(&self) -> u32 {
        self.size
    }

    pub fn kvsname(&self) -> &str {
        &self.kvsname
    }

    /// Publishes `key` = `value` (visible to others after the next [`Pmi::fence`]).
    pub fn put(&mut self, key: &str, value: &str) -> Result<(), PmiError> {
        check_word(key, self.key_max, true)?;
        check_word(value, self.value_max, false)?;
        let line = format!("cmd=put kvsname={} key={key} value={value}", self.kvsname);
        let reply = self.call(&line, "put_result")?;
        self.check_rc(&reply, "put")
    }

    /// Waits until every process of the job reached its fence; puts are then visible.
    pub fn fence(&mut self) -> Result<(), PmiError> {
        self.call("cmd=barrier_in", "barrier_out").map(drop)
    }

    /// The value another process put before the last fence.
    pub fn get(&mut self, key: &str) -> Result<String, PmiError> {
        check_word(key, self.key_max, true)?;
        let line = format!("cmd=get kvsname={} key={key}", self.kvsname);
        let reply = self.call(&line, "get_result")?;
        if reply.rc() != 0 {
            return Err(PmiError::NotFound(key.to_string()));
        }
        reply
            .fields
            .get("value")
            .cloned()
            .ok_or_else(|| PmiError::NotFound(key.to_string()))
    }

    /// Every process's `value`, in rank order: puts `{prefix}-{rank}`, fences, gets each
    /// other rank's (the wire-up of node addresses: one value per daemon).
    pub fn allgather(&mut self, prefix: &str, value: &str) -> Result<Vec<String>, PmiError> {
        self.put(&format!("{prefix}-{}", self.rank), value)?;
        self.fence()?;
        (0..self.size)
            .map(|r| match r == self.rank {
                true => Ok(value.to_string()),
                false => self.get(&format!("{prefix}-{r}")),
            })
            .collect()
    }

    /// Tells the launcher this process is done with PMI (also done on drop).
    pub fn finalize(mut self) -> Result<(), PmiError> {
        self.finalize_once()
    }

    fn finalize_once(&mut self) -> Result<(), PmiError> {
        if self.finalized {
            return Ok(());
        }
        self.finalized = true;
        self.call("cmd=finalize", "finalize_ack").map(drop)
    }

    fn call(&mut self, request: &str, expected: &'static str) -> Result<Reply, PmiError> {
        self.writer.write_all(format!("{request}\n").as_bytes())?;
        self.writer.flush()?;
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(PmiError::Io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the launcher closed the PMI connection (waiting for cmd={expected})"),
            )));
        }
        match Reply::parse(&line) {
            Some(reply) if reply.cmd == expected => Ok(reply),
            _ => Err(PmiError::Protocol {
                expected,
                got: line.trim_end().to_string(),
            }),
        }
    }

    fn check_rc(&self, reply: &Reply, cmd: &'static str) -> Result<(), PmiError> {
        match reply.rc() {
            0 => Ok(()),
            rc => Err(PmiError::Failed {
                cmd,
                rc,
                line: format!("{reply:?}"),
            }),
        }
    }
}

impl Drop for Pmi {
    fn drop(&mut self) {
        let _ = self.finalize_once();
    }
}

/// A borrowed descriptor for a `fcntl` probe.
fn unsafe_borrow(fd: RawFd) -> std::os::fd::BorrowedFd<'static> {
    // SAFETY: used only for an F_GETFD probe right away; F_GETFD on a closed descriptor
    // fails with EBADF instead of touching anything.
    unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }
}

fn check_word(word: &str, max: usize, is_key: bool) -> Result<(), PmiError> {
    let bad = word.is_empty() && is_key
        || word.len() >= max
        || word.contains(|c: char| c.is_whitespace() || c == '\0')
        || (is_key && word.contains('='));
    if bad {
        Err(PmiError::BadWord(word.to_string()))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_parse() {
        let r = Reply::parse("cmd=get_result rc=0 msg=success value=10.0.0.1:4000\n").unwrap();
        assert_eq!(r.cmd, "get_result");
        assert_eq!(r.fields["value"], "10.0.0.1:4000");
        assert_eq!(r.rc(), 0);
        let r = Reply::parse("cmd=get_result rc=-1 msg=key_x_not_found").unwrap();
        assert_eq!(r.rc(), -1);
        let r = Reply::parse("cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024").unwrap();
        assert_eq!(r.fields["vallen_max"], "1024");
        assert_eq!(Reply::parse("rc=0 value=x"), None);
        assert_eq!(Reply::parse(""), None);
        // A value holding '=' keeps everything after the first one.
        let r = Reply::parse("cmd=get_result rc=0 value=a=b").unwrap();
        assert_eq!(r.fields["value"], "a=b");
    }

    #[test]
    fn words_that_cannot_travel_are_refused() {
        assert!(check_word("strobe-addr-0", 64, true).is_ok());
        assert!(check_word("10.213.7.1:39911", 1024, false).is_ok());
        assert!(check_word("", 1024, false).is_ok());
        for (word, key) in [("a b", false), ("a\nb", false), ("k=v", true), ("", true)] {
            assert!(check_word(word, 64, key).is_err(), "{word:?}");
        }
        assert!(check_word(&"k".repeat(64), 64, true).is_err());
    }

    /// The whole exchange against a scripted launcher over a socket pair.
    #[test]
    fn client_speaks_the_protocol() {
        use std::os::unix::net::UnixStream;
        let (client, server) = UnixStream::pair().unwrap();
        let launcher = std::thread::spawn(move || {
            let mut lines = BufReader::new(server.try_clone().unwrap()).lines();
            let mut out = server;
            let script = [
                (
                    "cmd=init pmi_version=1 pmi_subversion=1",
                    "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0",
                ),
                (
                    "cmd=get_maxes",
                    "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024",
                ),
                ("cmd=get_my_kvsname", "cmd=my_kvsname kvsname=kvs_7_0"),
                (
                    "cmd=put kvsname=kvs_7_0 key=k0 value=v0",
                    "cmd=put_result rc=0 msg=success",
                ),
                ("cmd=barrier_in", "cmd=barrier_out"),
                (
                    "cmd=get kvsname=kvs_7_0 key=k1",
                    "cmd=get_result rc=0 msg=success value=v1",
                ),
                (
                    "cmd=get kvsname=kvs_7_0 key=nope",
                    "cmd=get_result rc=-1 msg=key_nope_not_found",
                ),
                ("cmd=finalize", "cmd=finalize_ack"),
            ];
            for (expect, answer) in script {
                assert_eq!(lines.next().unwrap().unwrap(), expect);
                writeln!(out, "{answer}").unwrap();
            }
        });
        let mut pmi = Pmi::connect(
            Box::new(client.try_clone().unwrap()),
            Box::new(client),
            0,
            2,
        )
        .unwrap();
        assert_eq!(pmi.kvsname(), "kvs_7_0");
        pmi.put("k0", "v0").unwrap();
        pmi.fence().unwrap();
        assert_eq!(pmi.get("k1").unwrap(), "v1");
        assert!(matches!(pmi.get("nope"), Err(PmiError::NotFound(_))));
        pmi.finalize().unwrap();
        launcher.join().unwrap();
    }
}
