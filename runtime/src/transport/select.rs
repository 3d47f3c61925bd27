//! Which transport connects a job's nodes (`--transport auto|shm|tcp|verbs`).
//!
//! - Within one host the node managers always share memory (`shm`): a NIC between two
//!   processes of one host would only add copies.
//! - Between hosts (node daemons), `auto` takes verbs when every daemon found an RDMA
//!   device with an active port, TCP otherwise, silently (`--summary` says which);
//!   `tcp` forces TCP; `verbs` requires verbs and fails at once, with the provider's
//!   one-line explanation, where it is unavailable.
//! - `shm` across hosts is refused: shared memory does not cross hosts.
//!
//! `STROBE_VERBS_PROVIDER=emulated` is a test hook: the verbs provider is the in-process
//! emulation (`verbs::emu`) instead of libibverbs. With `STROBE_ISOLATE_NODES=1` the
//! launcher's in-process nodes then talk through the verbs transport over an emulated
//! fabric, so real MPI programs exercise the verbs protocol where no RDMA device exists.

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;

use super::tcp::TcpBinding;
use super::verbs::{self, Provider, VerbsBinding, VerbsError};
use super::{Transport, TransportError};

/// The device (and port) a node daemon's verbs binding uses, `NAME` or `NAME:PORT`, on a
/// host with several HCAs (default: the first device with an active port).
pub const ENV_VERBS_DEVICE: &str = "STROBE_VERBS_DEVICE";

/// The environment variable of the emulated-provider test hook.
pub const ENV_VERBS_PROVIDER: &str = "STROBE_VERBS_PROVIDER";

/// What the user asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TransportChoice {
    #[default]
    Auto,
    Shm,
    Tcp,
    Verbs,
}

impl FromStr for TransportChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "auto" => TransportChoice::Auto,
            "shm" => TransportChoice::Shm,
            "tcp" => TransportChoice::Tcp,
            "verbs" => TransportChoice::Verbs,
            other => {
                return Err(format!(
                    "unknown transport {other:?} (auto, shm, tcp or verbs)"
                ))
            }
        })
    }
}

impl fmt::Display for TransportChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TransportChoice::Auto => "auto",
            TransportChoice::Shm => "shm",
            TransportChoice::Tcp => "tcp",
            TransportChoice::Verbs => "verbs",
        })
    }
}

/// The transport a job runs over (what `--summary` prints and the recording stores).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chosen {
    Shm,
    Tcp,
    Verbs,
}

impl Chosen {
    pub fn name(self) -> &'static str {
        match self {
            Chosen::Shm => "shm",
            Chosen::Tcp => "tcp",
            Chosen::Verbs => "verbs",
        }
    }
}

impl fmt::Display for Chosen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether the emulated-provider test hook is on.
pub fn emulated_verbs() -> bool {
    std::env::var_os(ENV_VERBS_PROVIDER).is_some_and(|v| v == "emulated")
}

/// This machine's verbs provider: the emulation under the test hook (one device per
/// node of up to 64 nodes; every in-process job builds its own fabric), else libibverbs.
pub fn verbs_provider() -> Result<Arc<dyn Provider>, VerbsError> {
    if emulated_verbs() {
        let fabric: Arc<dyn Provider> = verbs::emu::EmuFabric::new(64);
        return Ok(fabric);
    }
    verbs::system_provider()
}

/// Why verbs cannot be used here (`None`: a device with an active port exists): the
/// one line `--transport verbs` prints.
pub fn verbs_unavailable() -> Option<String> {
    match verbs_provider() {
        Ok(p) => no_active_port(p.as_ref()),
        Err(e) => Some(e.to_string()),
    }
}

/// Why `provider` has no device with an active port, if it has none.
fn no_active_port(provider: &dyn Provider) -> Option<String> {
    match provider.devices() {
        Err(e) => Some(VerbsError::Unavailable(e.to_string()).to_string()),
        Ok(d) if d.iter().any(|d| d.active_port().is_some()) => None,
        Ok(d) if d.is_empty() => Some(VerbsError::Unavailable("no RDMA device".into()).to_string()),
        Ok(_) => {
            Some(VerbsError::Unavailable("no RDMA device has an active port".into()).to_string())
        }
    }
}

/// The transport of a job whose nodes all run on this host (the launcher): `shm`, or
/// verbs in the isolated-nodes test mode over the emulated provider. `--transport verbs`
/// is still checked, so it fails where verbs is unavailable, as the user asked.
pub fn resolve_local(choice: TransportChoice, isolated_nodes: bool) -> Result<Chosen, String> {
    if choice == TransportChoice::Verbs {
        if let Some(why) = verbs_unavailable() {
            return Err(format!("--transport verbs: {why}"));
        }
    }
    Ok(if isolated_nodes && emulated_verbs() {
        Chosen::Verbs
    } else {
        Chosen::Shm
    })
}

/// The transport between node daemons on several hosts, given each daemon's verbs
/// report (`Ok(device)` or why it has none), in node order.
pub fn resolve_hosts(
    choice: TransportChoice,
    verbs: &[Result<String, String>],
) -> Result<Chosen, String> {
    let missing = verbs
        .iter()
        .enumerate()
        .find_map(|(n, v)| v.as_ref().err().map(|why| (n, why)));
    match (choice, missing) {
        (TransportChoice::Shm, _) => Err(
            "--transport shm: the job spans several hosts, and shared memory does not cross hosts"
                .into(),
        ),
        (TransportChoice::Tcp, _) => Ok(Chosen::Tcp),
        (TransportChoice::Auto, None) | (TransportChoice::Verbs, None) => Ok(Chosen::Verbs),
        (TransportChoice::Auto, Some(_)) => Ok(Chosen::Tcp),
        (TransportChoice::Verbs, Some((n, why))) => {
            Err(format!("--transport verbs: node {n}: {why}"))
        }
    }
}

/// A one-node job's verbs "offer": verbs is available, but there is no fabric to build.
const ONE_NODE: &str = "a one-node job has no fabric";

/// The exit status of a job refused for its `--transport` (the CLI's usage status).
pub const EXIT_TRANSPORT_REFUSED: i32 = 2;

/// A node daemon's verbs side of wire-up: a binding on the first device with an active
/// port of this machine's libibverbs (never the emulation: its fabric lives in one
/// process), or why there is none. A one-node job has no fabric: only availability.
pub fn daemon_verbs(
    node: u32,
    nodes: u32,
    global_size: usize,
) -> Result<super::verbs::VerbsBinding, String> {
    let provider = verbs::system_provider().map_err(|e| e.to_string())?;
    if let Some(why) = no_active_port(provider.as_ref()) {
        return Err(why);
    }
    if nodes < 2 {
        return Err(ONE_NODE.into());
    }
    let cfg = super::verbs::VerbsConfig::new(nodes, global_size, crate::engine::EVENTS);
    // The device STROBE_VERBS_DEVICE pins (system_provider() checked it has an active port).
    let device = verbs::system::pinned_device_name();
    super::verbs::VerbsBinding::open(provider.as_ref(), device.as_deref(), node, cfg)
        .map_err(|e| e.to_string())
}

/// What a node daemon reports at wire-up (the `FabricAddr` control message, a string so
/// the control schema is unchanged): its TCP fabric address, then on a second line its
/// verbs offer, `verbs <address>` or `noverbs <why>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Offer {
    pub tcp: String,
    /// The verbs address (`VerbsBinding::address`), or why this node has none.
    pub verbs: Result<String, String>,
}

impl Offer {
    pub fn encode(&self) -> String {
        match &self.verbs {
            Ok(addr) => format!("{}\nverbs {addr}", self.tcp),
            Err(why) => format!("{}\nnoverbs {}", self.tcp, why.replace('\n', " ")),
        }
    }

    pub fn decode(s: &str) -> Offer {
        let (tcp, rest) = s.split_once('\n').unwrap_or((s, ""));
        let verbs = if let Some(addr) = rest.strip_prefix("verbs ") {
            Ok(addr.to_string())
        } else if let Some(why) = rest.strip_prefix("noverbs ") {
            Err(why.to_string())
        } else {
            Err("the node daemon made no verbs offer".to_string())
        };
        Offer {
            tcp: tcp.to_string(),
            verbs,
        }
    }
}

/// The Machine Manager's decision for a job across daemons: the transport, and what each
/// daemon gets (`FabricPeers`): every node's address on it, each prefixed with its name
/// (`tcp <addr>` or `verbs <address>`).
pub fn decide(choice: TransportChoice, offers: &[Offer]) -> Result<(Chosen, Vec<String>), String> {
    let reports: Vec<Result<String, String>> = offers.iter().map(|o| o.verbs.clone()).collect();
    let chosen = resolve_hosts(choice, &reports)?;
    let peers = offers
        .iter()
        .map(|o| match (chosen, &o.verbs) {
            (Chosen::Verbs, Ok(addr)) => format!("verbs {addr}"),
            _ => format!("tcp {}", o.tcp),
        })
        .collect();
    Ok((chosen, peers))
}

/// [`decide`] for a whole job: a one-node job has no fabric (its node manager works in
/// shared memory) and only `--transport verbs` is checked against its daemon's offer.
pub fn decide_job(
    choice: TransportChoice,
    offers: &[Offer],
) -> Result<(Chosen, Vec<String>), String> {
    match offers {
        [one] => match (&one.verbs, choice) {
            (Err(why), TransportChoice::Verbs) if why != ONE_NODE => {
                Err(format!("--transport verbs: node 0: {why}"))
            }
            _ => Ok((Chosen::Shm, vec![one.tcp.clone()])),
        },
        _ => decide(choice, offers),
    }
}

/// A node daemon's fabric: joins the transport the Machine Manager chose (`FabricPeers`,
/// every entry naming it), the verbs binding or the TCP one; the other is dropped.
pub fn join_chosen(
    peers: &[String],
    tcp: TcpBinding,
    verbs: Result<VerbsBinding, String>,
) -> Result<Arc<dyn Transport>, TransportError> {
    if peers.first().map(|p| parse_peer(p).0) == Some(Chosen::Verbs) {
        let addrs: Vec<String> = peers.iter().map(|p| parse_peer(p).1.to_string()).collect();
        let b = verbs.map_err(|why| TransportError::Io(format!("verbs chosen, but {why}")))?;
        return Ok(Arc::new(b.join(&addrs)?));
    }
    drop(verbs);
    let addrs = peers
        .iter()
        .map(|p| parse_peer(p).1.parse::<SocketAddr>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TransportError::Io(format!("a fabric address: {e}")))?;
    Ok(Arc::new(tcp.join(&addrs)?))
}

/// A `FabricPeers` entry: the transport and the address (a bare address is TCP).
pub fn parse_peer(s: &str) -> (Chosen, &str) {
    if let Some(a) = s.strip_prefix("verbs ") {
        (Chosen::Verbs, a)
    } else {
        (Chosen::Tcp, s.strip_prefix("tcp ").unwrap_or(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_parse_and_print() {
        for c in ["auto", "shm", "tcp", "verbs"] {
            assert_eq!(c.parse::<TransportChoice>().unwrap().to_string(), c);
        }
        assert!("ib".parse::<TransportChoice>().is_err());
    }

    #[test]
    fn across_hosts_auto_takes_verbs_only_when_every_node_has_it() {
        let all = [Ok("mlx5_0".to_string()), Ok("mlx5_0".to_string())];
        let one_missing = [Ok("mlx5_0".to_string()), Err("verbs unavailable: x".into())];
        assert_eq!(
            resolve_hosts(TransportChoice::Auto, &all),
            Ok(Chosen::Verbs)
        );
        assert_eq!(
            resolve_hosts(TransportChoice::Auto, &one_missing),
            Ok(Chosen::Tcp)
        );
        assert_eq!(resolve_hosts(TransportChoice::Tcp, &all), Ok(Chosen::Tcp));
        assert_eq!(
            resolve_hosts(TransportChoice::Verbs, &one_missing),
            Err("--transport verbs: node 1: verbs unavailable: x".into())
        );
        assert!(resolve_hosts(TransportChoice::Shm, &all).is_err());
    }

    #[test]
    fn offers_round_trip_and_the_decision_names_every_peer() {
        let with = Offer {
            tcp: "10.0.0.1:4000".into(),
            verbs: Ok("strobe-verbs/1 0 2".into()),
        };
        let without = Offer {
            tcp: "10.0.0.2:4000".into(),
            verbs: Err("verbs unavailable: no RDMA device".into()),
        };
        for o in [&with, &without] {
            assert_eq!(Offer::decode(&o.encode()), *o);
        }
        assert!(Offer::decode("10.0.0.3:1").verbs.is_err());
        let (c, peers) = decide(TransportChoice::Auto, &[with.clone(), with.clone()]).unwrap();
        assert_eq!(c, Chosen::Verbs);
        assert_eq!(parse_peer(&peers[1]), (Chosen::Verbs, "strobe-verbs/1 0 2"));
        let (c, peers) = decide(TransportChoice::Auto, &[with.clone(), without.clone()]).unwrap();
        assert_eq!(c, Chosen::Tcp);
        assert_eq!(parse_peer(&peers[1]), (Chosen::Tcp, "10.0.0.2:4000"));
        assert_eq!(parse_peer("10.0.0.2:4000"), (Chosen::Tcp, "10.0.0.2:4000"));
        let e = decide(TransportChoice::Verbs, &[with, without]).unwrap_err();
        assert_eq!(
            e,
            "--transport verbs: node 1: verbs unavailable: no RDMA device"
        );
    }

    /// A provider whose devices are listed as given (nothing can be opened).
    struct Listed(Vec<verbs::provider::DeviceInfo>);

    impl Provider for Listed {
        fn name(&self) -> &'static str {
            "listed"
        }
        fn devices(&self) -> Result<Vec<verbs::provider::DeviceInfo>, VerbsError> {
            Ok(self.0.clone())
        }
        fn open(&self, _: &str, _: u8) -> Result<Arc<dyn verbs::provider::Device>, VerbsError> {
            Err(VerbsError::Unavailable("listed only".into()))
        }
    }

    #[test]
    fn no_device_and_no_active_port_are_told_apart() {
        use verbs::provider::{DeviceInfo, LinkLayer, PortInfo};
        let port = |active| PortInfo {
            port: 1,
            active,
            link_layer: LinkLayer::Ethernet,
            lid: 0,
            gid: [0; 16],
            mtu: 1024,
        };
        let dev = |active| DeviceInfo {
            name: "rxe0".into(),
            ports: vec![port(active)],
        };
        assert_eq!(
            no_active_port(&Listed(vec![])).as_deref(),
            Some("verbs unavailable: no RDMA device")
        );
        assert_eq!(
            no_active_port(&Listed(vec![dev(false)])).as_deref(),
            Some("verbs unavailable: no RDMA device has an active port")
        );
        assert_eq!(no_active_port(&Listed(vec![dev(false), dev(true)])), None);
    }
}
