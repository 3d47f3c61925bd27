//! Authentication of node links: a per-job secret and an HMAC-SHA256 challenge-response.
//!
//! The Machine Manager (or whoever starts the job) generates a [`JobSecret`] and hands it to
//! every node endpoint through the environment ([`SECRET_ENV`]) or stdin, never argv:
//! command lines are world-readable in `/proc/PID/cmdline`, a process's environment is
//! readable only by its owner (and root). Every TCP connection between two endpoints then
//! runs a mutual challenge-response (see `tcp::wireup` and docs/multi-host.md):
//!
//! ```text
//! acceptor -> connector   Hello  { acceptor node, nonce_a }
//! connector -> acceptor   Auth   { connector node, job shape, nonce_c,
//!                                  HMAC(secret, "connect" | transcript) }
//! acceptor -> connector   Accept { HMAC(secret, "accept" | transcript) }
//! ```
//!
//! where the transcript binds both node ids, the job's shape and both fresh 32-byte nonces,
//! so a proof can be neither replayed on another connection nor reflected back to its
//! sender. The secret itself never crosses the network.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::TransportError;

/// The environment variable a node endpoint reads its job secret from (hex).
pub const SECRET_ENV: &str = "STROBE_JOB_SECRET";

/// Length of a job secret and of every challenge nonce, in bytes.
pub const SECRET_LEN: usize = 32;

type HmacSha256 = Hmac<Sha256>;

/// The secret every endpoint of one job shares. `Debug` does not print it.
#[derive(Clone, PartialEq, Eq)]
pub struct JobSecret([u8; SECRET_LEN]);

impl std::fmt::Debug for JobSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JobSecret(..)")
    }
}

/// Which side of a handshake a proof comes from: the two proofs of one connection differ,
/// so neither can be reflected as the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Connector,
    Acceptor,
}

/// Everything a handshake's proofs cover.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transcript<'a> {
    pub acceptor: u32,
    pub connector: u32,
    pub nodes: u32,
    pub global_size: u64,
    pub events: u32,
    pub acceptor_nonce: &'a [u8],
    pub connector_nonce: &'a [u8],
}

/// Fresh random bytes from the operating system (getrandom(2)).
pub fn random_nonce() -> Result<[u8; SECRET_LEN], TransportError> {
    let mut n = [0u8; SECRET_LEN];
    getrandom::fill(&mut n).map_err(|e| TransportError::Io(format!("getrandom: {e}")))?;
    Ok(n)
}

impl JobSecret {
    /// A new random secret for a job.
    pub fn generate() -> Result<JobSecret, TransportError> {
        random_nonce().map(JobSecret)
    }

    /// Parses the hex form ([`JobSecret::to_hex`]): exactly 64 hex digits.
    pub fn from_hex(text: &str) -> Result<JobSecret, TransportError> {
        let text = text.trim();
        let bad = || {
            TransportError::Io(format!(
                "a job secret is {} hex digits, got {} characters",
                SECRET_LEN * 2,
                text.len()
            ))
        };
        if text.len() != SECRET_LEN * 2 || !text.is_ascii() {
            return Err(bad());
        }
        let mut out = [0u8; SECRET_LEN];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(JobSecret(out))
    }

    /// Reads the secret from [`SECRET_ENV`]; a clear error when it is missing or malformed.
    pub fn from_env() -> Result<JobSecret, TransportError> {
        let v = std::env::var(SECRET_ENV).map_err(|_| {
            TransportError::Io(format!(
                "no job secret: set {SECRET_ENV} (64 hex digits) in the environment"
            ))
        })?;
        JobSecret::from_hex(&v)
    }

    /// The hex form, for handing to a child process's environment or stdin.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn mac(&self, role: Role, t: &Transcript<'_>) -> HmacSha256 {
        let mut m = HmacSha256::new_from_slice(&self.0).expect("HMAC accepts keys of any length");
        m.update(b"strobe-link-v1 ");
        m.update(match role {
            Role::Connector => b"connect",
            Role::Acceptor => b"accept\0",
        });
        for n in [t.acceptor, t.connector, t.nodes, t.events] {
            m.update(&n.to_le_bytes());
        }
        m.update(&t.global_size.to_le_bytes());
        for nonce in [t.acceptor_nonce, t.connector_nonce] {
            m.update(&(nonce.len() as u32).to_le_bytes());
            m.update(nonce);
        }
        m
    }

    /// The proof `role` sends for transcript `t`.
    pub fn prove(&self, role: Role, t: &Transcript<'_>) -> Vec<u8> {
        self.mac(role, t).finalize().into_bytes().to_vec()
    }

    /// Whether `proof` is `role`'s proof for `t` (constant-time comparison).
    pub fn verify(&self, role: Role, t: &Transcript<'_>, proof: &[u8]) -> bool {
        self.mac(role, t).verify_slice(proof).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transcript<'a>(a: &'a [u8], c: &'a [u8]) -> Transcript<'a> {
        Transcript {
            acceptor: 0,
            connector: 1,
            nodes: 2,
            global_size: 4096,
            events: 4,
            acceptor_nonce: a,
            connector_nonce: c,
        }
    }

    #[test]
    fn proofs_verify_only_with_the_same_secret_role_and_transcript() {
        let s = JobSecret::generate().unwrap();
        let other = JobSecret::generate().unwrap();
        assert_ne!(s, other);
        let (a, c) = (random_nonce().unwrap(), random_nonce().unwrap());
        let t = transcript(&a, &c);
        let p = s.prove(Role::Connector, &t);
        assert!(s.verify(Role::Connector, &t, &p));
        assert!(
            !other.verify(Role::Connector, &t, &p),
            "another job's secret"
        );
        assert!(
            !s.verify(Role::Acceptor, &t, &p),
            "reflected to the other role"
        );
        let t2 = Transcript {
            connector: 2,
            ..t.clone()
        };
        assert!(!s.verify(Role::Connector, &t2, &p), "another node id");
        let c2 = random_nonce().unwrap();
        assert!(
            !s.verify(Role::Connector, &transcript(&a, &c2), &p),
            "replayed"
        );
        assert!(!s.verify(Role::Connector, &t, &p[..31]), "truncated");
    }

    #[test]
    fn hex_round_trip_and_refusals() {
        let s = JobSecret::generate().unwrap();
        assert_eq!(JobSecret::from_hex(&s.to_hex()).unwrap(), s);
        assert_eq!(
            JobSecret::from_hex(&format!(" {}\n", s.to_hex())).unwrap(),
            s
        );
        assert!(JobSecret::from_hex("abc").is_err());
        assert!(JobSecret::from_hex(&"zz".repeat(32)).is_err());
        assert!(JobSecret::from_hex(&"é".repeat(32)).is_err());
        assert_eq!(format!("{s:?}"), "JobSecret(..)", "never printed");
    }
}
