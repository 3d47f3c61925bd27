//! What verbs can use on this host: the provider `system_provider()` returns, the checks
//! that explain in one line why verbs is unavailable, and the report `strobe doctor`
//! prints (docs/cli.md, docs/multi-host.md "RDMA (verbs)").

use std::fmt::Write as _;
use std::sync::Arc;

use super::ibverbs::IbverbsProvider;
use super::ibverbs_sys::LIBIBVERBS;
use super::provider::{DeviceInfo, LinkLayer, PortInfo, Provider, VerbsError};

/// Chooses the provider: unset or `libibverbs` for the real one; `emulated` is the test
/// hook of the in-process emulation.
pub const PROVIDER_ENV: &str = "STROBE_VERBS_PROVIDER";
/// Pins the device (`mlx5_0`) verbs uses, through its first active port; default: the
/// first device that has an active port. (A port is not pinned: a multi-port HCA usually
/// has one port cabled, and the transport opens the first active one.)
pub const DEVICE_ENV: &str = "STROBE_VERBS_DEVICE";
/// The library to load instead of `libibverbs.so.1` (a path, for an rdma-core installed
/// outside the loader's search path).
pub const LIBRARY_ENV: &str = "STROBE_VERBS_LIBRARY";
/// The locked-memory limit below which verbs is refused: every byte the transport
/// registers (each node's global memory and its staging buffers) counts against
/// `RLIMIT_MEMLOCK`, and a registration failing mid-job is a worse report than this one.
/// 64 MiB covers the default global memory and staging of a node with room to spare.
pub const MIN_MEMLOCK: u64 = 64 << 20;

/// The locked-memory limit of this process: `None` when unlimited or when the process may
/// exceed it anyway (root has `CAP_IPC_LOCK`).
pub fn memlock_limit() -> Option<u64> {
    if rustix::process::geteuid().is_root() {
        return None;
    }
    memlock_rlimit()
}

/// `RLIMIT_MEMLOCK`'s soft limit (`None`: unlimited).
fn memlock_rlimit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Memlock).current
}

/// The library [`LIBRARY_ENV`] names, or libibverbs.so.1.
fn library_name() -> String {
    std::env::var(LIBRARY_ENV)
        .ok()
        .filter(|l| !l.is_empty())
        .unwrap_or_else(|| LIBIBVERBS.to_string())
}

/// Why verbs cannot be used with these devices and this memlock limit, as one line; or the
/// device and port it uses. `pinned` is [`DEVICE_ENV`]'s value.
pub fn choose_port(
    devices: &[DeviceInfo],
    memlock: Option<u64>,
    pinned: Option<&str>,
) -> Result<(String, PortInfo), VerbsError> {
    let unavailable = |s: String| Err(VerbsError::Unavailable(s));
    if devices.is_empty() {
        return unavailable("no RDMA device (/sys/class/infiniband is empty)".to_string());
    }
    let want_dev = pinned.filter(|p| !p.is_empty());
    let candidates: Vec<&DeviceInfo> = devices
        .iter()
        .filter(|d| want_dev.is_none_or(|w| d.name == w))
        .collect();
    if candidates.is_empty() {
        let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
        return unavailable(format!(
            "{DEVICE_ENV}={}: no such device (this host has {})",
            pinned.unwrap_or_default(),
            names.join(", ")
        ));
    }
    let found = candidates.iter().find_map(|d| {
        d.ports
            .iter()
            .find(|p| p.active)
            .map(|p| (d.name.clone(), p.clone()))
    });
    let Some(found) = found else {
        let names: Vec<&str> = candidates.iter().map(|d| d.name.as_str()).collect();
        return unavailable(match names.as_slice() {
            [one] => format!("device {one} has no active port"),
            many => format!("devices {} have no active port", many.join(", ")),
        });
    };
    if let Some(limit) = memlock.filter(|&l| l < MIN_MEMLOCK) {
        return unavailable(format!(
            "locked-memory limit is {} but RDMA needs at least {} registered: run `ulimit -l \
             unlimited` first (LimitMEMLOCK=infinity for a systemd unit, `memlock` in \
             /etc/security/limits.conf)",
            human_bytes(limit),
            human_bytes(MIN_MEMLOCK)
        ));
    }
    Ok(found)
}

fn human_bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 && n % (1 << 30) == 0 => format!("{} GiB", n >> 30),
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// The provider [`PROVIDER_ENV`] names, unchecked: libibverbs.
fn named_provider() -> Result<Arc<dyn Provider>, VerbsError> {
    match std::env::var(PROVIDER_ENV).ok().as_deref() {
        None | Some("") | Some("libibverbs") => {}
        // ---- verbsA's test hook --------------------------------------------------------
        // STROBE_VERBS_PROVIDER=emulated: the in-process emulation of RC queue pairs. Its
        // fabric lives in one process, so the hook is taken where a job's nodes are built
        // in process (`transport::select::verbs_provider`), before this is called; what
        // this machine offers a node daemon, or `strobe doctor`, is still libibverbs.
        Some("emulated") => {}
        // ---------------------------------------------------------------------------------
        Some(other) => {
            return Err(VerbsError::Unavailable(format!(
                "{PROVIDER_ENV}={other}: unknown provider (libibverbs or emulated)"
            )))
        }
    }
    Ok(Arc::new(IbverbsProvider::load_from(&library_name())?))
}

/// The provider of this machine, checked: libibverbs loads, a device has an active port
/// (the one [`DEVICE_ENV`] pins, if set), and the memlock limit allows registering memory.
pub fn system_provider() -> Result<Arc<dyn Provider>, VerbsError> {
    let provider = named_provider()?;
    let devices = provider.devices()?;
    choose_port(&devices, memlock_limit(), pinned_device_name().as_deref())?;
    Ok(provider)
}

/// The device [`DEVICE_ENV`] pins, if set (for `VerbsBinding::open`).
pub fn pinned_device_name() -> Option<String> {
    std::env::var(DEVICE_ENV).ok().filter(|d| !d.is_empty())
}

/// What verbs sees on this host, for `strobe doctor`: the library, every device and port,
/// the memlock limit, and the verdict. Returns the text and whether verbs is usable.
pub fn host_report() -> (String, bool) {
    let mut out = String::new();
    let provider = match named_provider() {
        Ok(p) => p,
        Err(e) => {
            let _ = writeln!(out, "library:  {} (not loaded)", library_name());
            let _ = writeln!(out, "verbs:    unavailable: {}", unavailable_text(&e));
            return (out, false);
        }
    };
    let _ = writeln!(out, "library:  {} ({})", library_name(), provider.name());
    if std::env::var(PROVIDER_ENV).is_ok_and(|v| v == "emulated") {
        let _ = writeln!(
            out,
            "note:     {PROVIDER_ENV}=emulated only changes jobs whose nodes run in one process"
        );
    }
    let devices = match provider.devices() {
        Ok(d) => d,
        Err(e) => {
            let _ = writeln!(out, "verbs:    unavailable: {e}");
            return (out, false);
        }
    };
    if devices.is_empty() {
        let _ = writeln!(out, "devices:  none");
    }
    for d in &devices {
        let _ = writeln!(out, "device:   {}", d.name);
        for p in &d.ports {
            let _ = writeln!(out, "  {}", port_line(p));
        }
    }
    let limit = memlock_limit();
    let root = if limit.is_none() && memlock_rlimit().is_some() {
        " (root: not bound by it)"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "memlock:  {}{root}",
        memlock_rlimit().map_or("unlimited".to_string(), human_bytes)
    );
    match choose_port(&devices, limit, pinned_device_name().as_deref()) {
        Ok((dev, p)) => {
            let _ = writeln!(
                out,
                "verbs:    usable: {dev} port {} ({})",
                p.port,
                link_name(p.link_layer)
            );
            (out, true)
        }
        Err(e) => {
            let _ = writeln!(out, "verbs:    unavailable: {}", unavailable_text(&e));
            (out, false)
        }
    }
}

/// The explanation of an error without the "verbs unavailable: " prefix.
fn unavailable_text(e: &VerbsError) -> String {
    match e {
        VerbsError::Unavailable(s) => s.clone(),
        other => other.to_string(),
    }
}

fn link_name(l: LinkLayer) -> &'static str {
    match l {
        LinkLayer::InfiniBand => "InfiniBand, LID addressing",
        LinkLayer::Ethernet => "RoCE, GID addressing",
    }
}

fn port_line(p: &PortInfo) -> String {
    let gid: Vec<String> = p
        .gid
        .chunks(2)
        .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
        .collect();
    format!(
        "port {}: {}, {}, lid {}, gid[0] {}, mtu {}",
        p.port,
        if p.active { "active" } else { "down" },
        link_name(p.link_layer),
        p.lid,
        gid.join(":"),
        p.mtu
    )
}
