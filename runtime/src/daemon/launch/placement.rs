//! Rank placement: the node (host index) of each rank, as mpirun users expect.
//!
//! Each host's capacity is `--ppn N` when given (every host, whatever its slots), else its
//! slot count from the host list (a host without one counts 1 when some other host has
//! one, as in MPICH's hostfiles), else unbounded (no host has a count).
//! - **block** (`--map-by slot`, the default): fill each host's capacity in order; with no
//!   capacity anywhere, contiguous blocks as even as possible (rank r on host
//!   `r * hosts / ranks`, the layout of `--nodes K` on one host).
//! - **`--map-by node`**: round robin over the hosts, skipping full ones.
//!
//! More ranks than capacity is an error (naming both) unless oversubscription is allowed
//! (`--oversubscribe`): a job with more ranks than cores still runs correctly under BCS,
//! only slower, but nobody should get it by accident. When allowed, placement starts
//! another round in the same order (as MPICH's Hydra does). Hosts that get no rank (a
//! hostfile with more slots than ranks) start no daemon: [`drop_unused_hosts`].

use std::fmt;
use std::str::FromStr;

use super::hostfile::Host;

/// `--map-by`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MapBy {
    /// Fill each host's slots in order (block).
    #[default]
    Slot,
    /// One rank per host in turn (round robin).
    Node,
}

impl FromStr for MapBy {
    type Err = PlacementError;
    fn from_str(s: &str) -> Result<MapBy, PlacementError> {
        match s {
            "slot" | "block" => Ok(MapBy::Slot),
            "node" => Ok(MapBy::Node),
            other => Err(PlacementError::UnknownMapBy(other.to_string())),
        }
    }
}

impl fmt::Display for MapBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MapBy::Slot => "slot",
            MapBy::Node => "node",
        })
    }
}

/// How to place (`--ppn`, `--map-by`, `--oversubscribe`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlacementOptions {
    pub ppn: Option<u32>,
    pub map_by: MapBy,
    pub oversubscribe: bool,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlacementError {
    #[error("no host to place ranks on")]
    NoHosts,
    #[error("--ppn must be 1 or more")]
    ZeroPpn,
    #[error("unknown --map-by {0:?} (slot or node)")]
    UnknownMapBy(String),
    #[error(
        "{ranks} ranks do not fit in the {capacity} slots of {hosts} host(s) ({why}); \
         give more hosts or slots, or allow it with --oversubscribe"
    )]
    Oversubscribed {
        ranks: u32,
        capacity: u64,
        hosts: usize,
        why: &'static str,
    },
}

/// The node (index into `hosts`) of each rank.
pub fn place(
    ranks: u32,
    hosts: &[Host],
    opts: &PlacementOptions,
) -> Result<Vec<u32>, PlacementError> {
    if hosts.is_empty() {
        return Err(PlacementError::NoHosts);
    }
    if opts.ppn == Some(0) {
        return Err(PlacementError::ZeroPpn);
    }
    let n = hosts.len() as u32;
    let Some((capacity, why)) = capacities(hosts, opts.ppn) else {
        return Ok(match opts.map_by {
            MapBy::Slot => (0..ranks)
                .map(|r| (r as u64 * n as u64 / ranks as u64) as u32)
                .collect(),
            MapBy::Node => (0..ranks).map(|r| r % n).collect(),
        });
    };
    let total: u64 = capacity.iter().map(|&c| c as u64).sum();
    if ranks as u64 > total && !opts.oversubscribe {
        return Err(PlacementError::Oversubscribed {
            ranks,
            capacity: total,
            hosts: hosts.len(),
            why,
        });
    }
    let order = round_order(&capacity, opts.map_by);
    // `order` holds each slot once (total entries); extra ranks go round again.
    Ok((0..ranks as usize)
        .map(|r| order[r % order.len()])
        .collect())
}

/// Each host's capacity and where it comes from; `None` when unbounded.
fn capacities(hosts: &[Host], ppn: Option<u32>) -> Option<(Vec<u32>, &'static str)> {
    if let Some(ppn) = ppn {
        return Some((vec![ppn; hosts.len()], "--ppn per host"));
    }
    if hosts.iter().any(|h| h.slots.is_some()) {
        let slots = hosts.iter().map(|h| h.slots.unwrap_or(1)).collect();
        return Some((slots, "the host list's slots; a host without a count has 1"));
    }
    None
}

/// The host of each slot, in the order ranks take them.
fn round_order(capacity: &[u32], map_by: MapBy) -> Vec<u32> {
    match map_by {
        MapBy::Slot => capacity
            .iter()
            .enumerate()
            .flat_map(|(host, &c)| std::iter::repeat_n(host as u32, c as usize))
            .collect(),
        MapBy::Node => {
            let most = capacity.iter().copied().max().unwrap_or(0);
            (0..most)
                .flat_map(|round| {
                    capacity
                        .iter()
                        .enumerate()
                        .filter(move |(_, &c)| c > round)
                        .map(|(host, _)| host as u32)
                })
                .collect()
        }
    }
}

/// Drops the hosts that got no rank and renumbers: the hosts to start daemons on (node i
/// on the i-th) and the node of each rank among them.
pub fn drop_unused_hosts(hosts: &[Host], node_of_rank: &[u32]) -> (Vec<Host>, Vec<u32>) {
    let mut new_index = vec![None; hosts.len()];
    let mut used = Vec::new();
    for (index, host) in hosts.iter().enumerate() {
        if node_of_rank.contains(&(index as u32)) {
            new_index[index] = Some(used.len() as u32);
            used.push(host.clone());
        }
    }
    let renumbered = node_of_rank
        .iter()
        .map(|&n| new_index[n as usize].expect("every rank's host is used"))
        .collect();
    (used, renumbered)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bare(n: usize) -> Vec<Host> {
        (1..=n).map(|k| Host::new(&format!("h{k}"), None)).collect()
    }

    fn opts(ppn: Option<u32>, map_by: MapBy) -> PlacementOptions {
        PlacementOptions {
            ppn,
            map_by,
            oversubscribe: false,
        }
    }

    #[test]
    fn block_without_slots_is_even_blocks() {
        let p = place(6, &bare(3), &PlacementOptions::default()).unwrap();
        assert_eq!(p, [0, 0, 1, 1, 2, 2]);
        let p = place(7, &bare(3), &PlacementOptions::default()).unwrap();
        assert_eq!(p, [0, 0, 0, 1, 1, 2, 2]);
    }

    #[test]
    fn block_fills_slots_in_order() {
        let hosts = [
            Host::new("a", Some(3)),
            Host::new("b", Some(2)),
            Host::new("c", None),
        ];
        let p = place(6, &hosts, &PlacementOptions::default()).unwrap();
        assert_eq!(p, [0, 0, 0, 1, 1, 2]);
        let p = place(4, &hosts, &PlacementOptions::default()).unwrap();
        assert_eq!(p, [0, 0, 0, 1]);
    }

    #[test]
    fn ppn_overrides_slots() {
        let hosts = [Host::new("a", Some(8)), Host::new("b", Some(8))];
        let p = place(4, &hosts, &opts(Some(2), MapBy::Slot)).unwrap();
        assert_eq!(p, [0, 0, 1, 1]);
        let err = place(5, &hosts, &opts(Some(2), MapBy::Slot)).unwrap_err();
        assert!(matches!(
            err,
            PlacementError::Oversubscribed { capacity: 4, .. }
        ));
        assert!(err.to_string().contains("--ppn"), "{err}");
    }

    #[test]
    fn map_by_node_is_round_robin() {
        let p = place(7, &bare(3), &opts(None, MapBy::Node)).unwrap();
        assert_eq!(p, [0, 1, 2, 0, 1, 2, 0]);
        // Full hosts are skipped.
        let hosts = [Host::new("a", Some(1)), Host::new("b", Some(3))];
        let p = place(4, &hosts, &opts(None, MapBy::Node)).unwrap();
        assert_eq!(p, [0, 1, 1, 1]);
        let p = place(4, &bare(2), &opts(Some(2), MapBy::Node)).unwrap();
        assert_eq!(p, [0, 1, 0, 1]);
    }

    #[test]
    fn too_many_ranks_is_an_error_unless_oversubscribing() {
        let hosts = [Host::new("a", Some(2)), Host::new("b", Some(1))];
        let err = place(4, &hosts, &PlacementOptions::default()).unwrap_err();
        assert_eq!(
            err,
            PlacementError::Oversubscribed {
                ranks: 4,
                capacity: 3,
                hosts: 2,
                why: "the host list's slots; a host without a count has 1"
            }
        );
        assert!(err.to_string().contains("--oversubscribe"));
        let over = PlacementOptions {
            oversubscribe: true,
            ..PlacementOptions::default()
        };
        assert_eq!(place(5, &hosts, &over).unwrap(), [0, 0, 1, 0, 0]);
    }

    #[test]
    fn bad_options() {
        assert_eq!(
            place(2, &[], &PlacementOptions::default()),
            Err(PlacementError::NoHosts)
        );
        assert_eq!(
            place(2, &bare(1), &opts(Some(0), MapBy::Slot)),
            Err(PlacementError::ZeroPpn)
        );
        assert_eq!("node".parse::<MapBy>(), Ok(MapBy::Node));
        assert_eq!("slot".parse::<MapBy>(), Ok(MapBy::Slot));
        assert!("core".parse::<MapBy>().is_err());
    }

    #[test]
    fn unused_hosts_are_dropped_and_nodes_renumbered() {
        let hosts = [
            Host::new("a", Some(1)),
            Host::new("b", Some(4)),
            Host::new("c", Some(4)),
        ];
        let p = place(3, &hosts, &opts(None, MapBy::Slot)).unwrap();
        assert_eq!(p, [0, 1, 1]);
        let (used, nodes) = drop_unused_hosts(&hosts, &p);
        assert_eq!(used, &hosts[..2]);
        assert_eq!(nodes, [0, 1, 1]);
        let (used, nodes) = drop_unused_hosts(&hosts, &[2, 2, 0]);
        assert_eq!(used, [hosts[0].clone(), hosts[2].clone()]);
        assert_eq!(nodes, [1, 1, 0]);
    }
}
