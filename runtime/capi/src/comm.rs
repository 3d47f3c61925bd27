//! Communicators and groups. Communicators are the runtime's (dup, split, free); groups
//! are lists of world ranks kept in the C layer. `MPI_Comm_create` is a split whose colour
//! says whether the rank is in the group; `MPI_Comm_create_group` creates a communicator
//! collectively over the group only. Intercommunicators are in `intercomm.rs`: here, the
//! calls that answer differently for them (size and group are the local group's).

use std::os::raw::c_int;
use std::sync::Arc;
use strobe_runtime::calls::Call;

use strobe_runtime::api::Comm;

use crate::attrs::{copy_attrs, delete_attrs};
use crate::consts::*;
use crate::env::ready;
use crate::error::{entry, fail, MpiResult};
use crate::intercomm::inter_of;
use crate::state::{self, st};
use crate::util::{array, count, put};

/// The runtime communicator behind a handle.
pub fn comm_of(h: MpiComm) -> MpiResult<Comm> {
    ready()?;
    if h == COMM_NULL {
        fail!(class::COMM, "MPI_COMM_NULL is not a communicator");
    }
    match st().comms.get(&h) {
        Some(c) => Ok(c.comm.clone()),
        None => fail!(class::COMM, "invalid communicator handle {h}"),
    }
}

/// World ranks of a communicator's members, in rank order.
pub fn members(c: &Comm) -> Vec<u32> {
    (0..c.size()).filter_map(|r| c.world_rank_of(r)).collect()
}

fn my_world_rank(c: &Comm) -> u32 {
    c.world_rank_of(c.rank()).unwrap_or(u32::MAX)
}

/// An intercommunicator's local group as a communicator.
fn c_local(x: &crate::intercomm::Inter) -> MpiResult<Comm> {
    comm_of(x.local)
}

/// Intracommunicator-only calls refuse intercommunicators with a clear message.
fn not_inter(comm: MpiComm, what: &str) -> MpiResult {
    if inter_of(comm).is_some() {
        fail!(
            class::UNSUPPORTED_OPERATION,
            "{what} on an intercommunicator is not supported yet"
        );
    }
    Ok(())
}

/// `MPI_Comm_create_group`'s key: the same on every member of the group.
fn group_key(parent: u32, tag: c_int, group: &[u32]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let words = [u64::from(parent), tag as u64]
        .into_iter()
        .chain(group.iter().map(|&w| u64::from(w)));
    for w in words {
        for b in w.to_le_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

fn group_of(h: MpiGroup) -> MpiResult<Arc<[u32]>> {
    if h == GROUP_NULL {
        fail!(class::GROUP, "MPI_GROUP_NULL is not a group");
    }
    match st().groups.get(&h) {
        Some(g) => Ok(g.clone()),
        None => fail!(class::GROUP, "invalid group handle {h}"),
    }
}

pub fn new_comm_handle(parent: MpiComm, c: Option<Comm>) -> MpiComm {
    match c {
        None => COMM_NULL,
        Some(c) => {
            let eh = st()
                .comms
                .get(&parent)
                .map_or(ERRORS_ARE_FATAL, |e| e.errhandler);
            state::insert_comm(c, eh)
        }
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_rank(comm: MpiComm, rank: *mut c_int) -> c_int {
    entry(Call::CommRank, comm, || {
        // SAFETY: `rank` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(rank, comm_of(comm)?.rank(), "rank") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_size(comm: MpiComm, size: *mut c_int) -> c_int {
    entry(Call::CommSize, comm, || {
        // SAFETY: `size` is a C output argument: NULL or writable (MPI contract).
        let n = match inter_of(comm) {
            Some(x) => x.local_members.len() as c_int,
            None => comm_of(comm)?.size(),
        };
        // SAFETY: `size` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(size, n, "size") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_dup(comm: MpiComm, out: *mut MpiComm) -> c_int {
    entry(Call::CommDup, comm, || {
        let c = comm_of(comm)?;
        if out.is_null() {
            fail!(class::ARG, "newcomm is NULL");
        }
        let h = match inter_of(comm) {
            Some(x) => crate::intercomm::dup(comm, &x)?,
            None => new_comm_handle(comm, Some(c.dup()?)),
        };
        if let Err(e) = copy_attrs(comm, h) {
            // A failed copy callback: no new communicator (MPI-3.1 6.7.2; MPICH returns
            // MPI_COMM_NULL).
            // SAFETY: `out` is a C output argument, checked non-NULL above.
            unsafe { put(out, COMM_NULL, "newcomm") }?;
            return Err(e);
        }
        crate::topo::on_dup(comm, h)?;
        // SAFETY: `out` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(out, h, "newcomm") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_split(
    comm: MpiComm,
    colour: c_int,
    key: c_int,
    out: *mut MpiComm,
) -> c_int {
    entry(Call::CommSplit, comm, || {
        let c = comm_of(comm)?;
        if out.is_null() {
            fail!(class::ARG, "newcomm is NULL");
        }
        let colour = match colour {
            UNDEFINED => None,
            k if k < 0 => fail!(
                class::ARG,
                "invalid colour {k} (colours are >= 0 or MPI_UNDEFINED)"
            ),
            k => Some(k),
        };
        if let Some(x) = inter_of(comm) {
            let h = crate::intercomm::split(comm, &x, colour, key)?;
            // SAFETY: `out` is a C output argument: NULL or writable (MPI contract).
            return unsafe { put(out, h, "newcomm") };
        }
        let s = c.split(colour, key)?;
        // SAFETY: `out` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(out, new_comm_handle(comm, s), "newcomm") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_create(
    comm: MpiComm,
    group: MpiGroup,
    out: *mut MpiComm,
) -> c_int {
    entry(Call::CommCreate, comm, || {
        let c = comm_of(comm)?;
        let g = group_of(group)?;
        if out.is_null() {
            fail!(class::ARG, "newcomm is NULL");
        }
        if let Some(x) = inter_of(comm) {
            // The group is a subgroup of the local group.
            if let Some(w) = g.iter().find(|w| !x.local_members.contains(w)) {
                fail!(
                    class::GROUP,
                    "the group contains world rank {w}, which is not in the local group"
                );
            }
            let me = my_world_rank(&c_local(&x)?);
            let (colour, key) = match g.iter().position(|&w| w == me) {
                Some(p) => (Some(0), p as c_int),
                None => (None, 0),
            };
            let h = crate::intercomm::split(comm, &x, colour, key)?;
            // SAFETY: `out` is a C output argument: NULL or writable (MPI contract).
            return unsafe { put(out, h, "newcomm") };
        }
        let m = members(&c);
        if let Some(x) = g.iter().find(|w| !m.contains(w)) {
            fail!(
                class::GROUP,
                "the group contains world rank {x}, which is not in the communicator"
            );
        }
        let me = my_world_rank(&c);
        // MPI-2.2: members may pass different groups if they are disjoint; the colour
        // names the group by its lowest world rank.
        let (colour, key) = match g.iter().position(|&w| w == me) {
            Some(p) => (g.iter().min().map(|&w| w as c_int), p as c_int),
            None => (None, 0),
        };
        let s = c.split(colour, key)?;
        // SAFETY: `out` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(out, new_comm_handle(comm, s), "newcomm") }
    })
}

/// `MPI_Comm_create_group` is collective over the group only: the runtime creates the
/// communicator once every member of the group has called, keyed by the group, the tag
/// and `comm` (so concurrent calls with different tags or groups stay apart).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_create_group(
    comm: MpiComm,
    group: MpiGroup,
    tag: c_int,
    out: *mut MpiComm,
) -> c_int {
    entry(Call::CommCreateGroup, comm, || {
        let c = comm_of(comm)?;
        not_inter(comm, "MPI_Comm_create_group")?;
        let g = group_of(group)?;
        if out.is_null() {
            fail!(class::ARG, "newcomm is NULL");
        }
        let me = my_world_rank(&c);
        if !g.contains(&me) {
            fail!(class::GROUP, "the calling rank is not in the group");
        }
        let m = members(&c);
        if let Some(x) = g.iter().find(|w| !m.contains(w)) {
            fail!(
                class::GROUP,
                "the group contains world rank {x}, which is not in the communicator"
            );
        }
        if tag < 0 {
            fail!(class::TAG, "invalid tag {tag}");
        }
        let key = group_key(c.id(), tag, &g);
        let s = Some(c.create_group(key, &g, 0)?);
        // SAFETY: `out` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(out, new_comm_handle(comm, s), "newcomm") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_free(comm: *mut MpiComm) -> c_int {
    let h = if comm.is_null() {
        COMM_NULL
    } else {
        unsafe { *comm }
    };
    entry(Call::CommFree, h, || {
        let c = comm_of(h)?;
        if h == COMM_WORLD || h == COMM_SELF {
            fail!(
                class::COMM,
                "MPI_COMM_WORLD and MPI_COMM_SELF cannot be freed"
            );
        }
        delete_attrs(h)?;
        if let Some(x) = inter_of(h) {
            crate::intercomm::free(h, &x)?;
        }
        crate::topo::on_free(h)?;
        c.free()?;
        st().comms.remove(&h);
        // SAFETY: `comm` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(comm, COMM_NULL, "comm") }
    })
}

fn compare(a: &[u32], b: &[u32]) -> c_int {
    if a == b {
        return CONGRUENT;
    }
    let (mut x, mut y) = (a.to_vec(), b.to_vec());
    x.sort_unstable();
    y.sort_unstable();
    if x == y {
        SIMILAR
    } else {
        UNEQUAL
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_compare(c1: MpiComm, c2: MpiComm, result: *mut c_int) -> c_int {
    entry(Call::CommCompare, c1, || {
        let a = comm_of(c1)?;
        let b = comm_of(c2)?;
        let r = if c1 == c2 {
            IDENT
        } else {
            compare(&members(&a), &members(&b))
        };
        // SAFETY: `result` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(result, r, "result") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_group(comm: MpiComm, group: *mut MpiGroup) -> c_int {
    entry(Call::CommGroup, comm, || {
        let c = comm_of(comm)?;
        if group.is_null() {
            fail!(class::ARG, "group is NULL");
        }
        let g = match inter_of(comm) {
            Some(x) => x.local_members.clone(),
            None => Arc::from(members(&c)),
        };
        // SAFETY: `group` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(group, state::insert_group(g), "group") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_test_inter(comm: MpiComm, flag: *mut c_int) -> c_int {
    entry(Call::CommTestInter, comm, || {
        comm_of(comm)?;
        let inter = c_int::from(inter_of(comm).is_some());
        // SAFETY: `flag` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(flag, inter, "flag") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_remote_size(comm: MpiComm, size: *mut c_int) -> c_int {
    entry(Call::CommRemoteSize, comm, || {
        comm_of(comm)?;
        let Some(x) = inter_of(comm) else {
            fail!(class::COMM, "not an intercommunicator");
        };
        // SAFETY: `size` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(size, x.remote_members.len() as c_int, "size") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Group_size(group: MpiGroup, size: *mut c_int) -> c_int {
    entry(Call::GroupSize, COMM_WORLD, || {
        // SAFETY: `size` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(size, group_of(group)?.len() as c_int, "size") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Group_rank(group: MpiGroup, rank: *mut c_int) -> c_int {
    entry(Call::GroupRank, COMM_WORLD, || {
        let g = group_of(group)?;
        let me = comm_of(COMM_WORLD)?.rank() as u32;
        let r = g
            .iter()
            .position(|&w| w == me)
            .map_or(UNDEFINED, |p| p as c_int);
        // SAFETY: `rank` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(rank, r, "rank") }
    })
}

fn check_ranks(g: &[u32], ranks: &[c_int]) -> MpiResult {
    let mut seen = vec![false; g.len()];
    for &r in ranks {
        if r < 0 || r as usize >= g.len() {
            fail!(class::RANK, "invalid rank {r} (group of size {})", g.len());
        }
        if std::mem::replace(&mut seen[r as usize], true) {
            fail!(class::RANK, "rank {r} appears twice");
        }
    }
    Ok(())
}

/// Register a group of `members` and store its handle in `*out`.
///
/// # Safety
/// `out` must be NULL or valid for writing one handle (a C output argument).
unsafe fn new_group(out: *mut MpiGroup, members: Vec<u32>) -> MpiResult {
    if out.is_null() {
        fail!(class::ARG, "newgroup is NULL");
    }
    // SAFETY: `out` is a C output argument: NULL or writable (MPI contract).
    unsafe { put(out, state::insert_group(Arc::from(members)), "newgroup") }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Group_incl(
    group: MpiGroup,
    n: c_int,
    ranks: *const c_int,
    out: *mut MpiGroup,
) -> c_int {
    entry(Call::GroupIncl, COMM_WORLD, || {
        let g = group_of(group)?;
        // SAFETY: `ranks` is a C input array of `count(n, "n")?` elements, or NULL (MPI contract).
        let r = unsafe { array(ranks, count(n, "n")?, "ranks") }?;
        check_ranks(&g, r)?;
        // SAFETY: `out` is a C output argument: NULL or writable (MPI contract).
        unsafe { new_group(out, r.iter().map(|&i| g[i as usize]).collect()) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Group_excl(
    group: MpiGroup,
    n: c_int,
    ranks: *const c_int,
    out: *mut MpiGroup,
) -> c_int {
    entry(Call::GroupExcl, COMM_WORLD, || {
        let g = group_of(group)?;
        // SAFETY: `ranks` is a C input array of `count(n, "n")?` elements, or NULL (MPI contract).
        let r = unsafe { array(ranks, count(n, "n")?, "ranks") }?;
        check_ranks(&g, r)?;
        let keep = (0..g.len())
            .filter(|i| !r.contains(&(*i as c_int)))
            .map(|i| g[i])
            .collect();
        // SAFETY: `keep` is a C output argument: NULL or writable (MPI contract).
        unsafe { new_group(out, keep) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Group_range_incl(
    group: MpiGroup,
    n: c_int,
    ranges: *const [c_int; 3],
    out: *mut MpiGroup,
) -> c_int {
    entry(Call::GroupRangeIncl, COMM_WORLD, || {
        let g = group_of(group)?;
        // SAFETY: `ranges` is a C input array of `count(n, "n")?` elements, or NULL (MPI contract).
        let rs = unsafe { array(ranges, count(n, "n")?, "ranges") }?;
        let mut picked = Vec::new();
        for &[first, last, stride] in rs {
            if stride == 0 {
                fail!(class::ARG, "range ({first}, {last}, 0) has a zero stride");
            }
            let mut r = first;
            while (stride > 0 && r <= last) || (stride < 0 && r >= last) {
                picked.push(r);
                r += stride;
            }
        }
        check_ranks(&g, &picked)?;
        // SAFETY: `out` is a C output argument: NULL or writable (MPI contract).
        unsafe { new_group(out, picked.iter().map(|&i| g[i as usize]).collect()) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Group_translate_ranks(
    g1: MpiGroup,
    n: c_int,
    r1: *const c_int,
    g2: MpiGroup,
    r2: *mut c_int,
) -> c_int {
    entry(Call::GroupTranslateRanks, COMM_WORLD, || {
        let a = group_of(g1)?;
        let b = group_of(g2)?;
        let k = count(n, "n")?;
        // SAFETY: `r1` is a C input array of `k` elements, or NULL (MPI contract).
        let src = unsafe { array(r1, k, "ranks1") }?;
        if k > 0 && r2.is_null() {
            fail!(class::ARG, "ranks2 is NULL");
        }
        for (i, &r) in src.iter().enumerate() {
            let t = if r == PROC_NULL {
                PROC_NULL
            } else {
                if r < 0 || r as usize >= a.len() {
                    fail!(class::RANK, "invalid rank {r} (group of size {})", a.len());
                }
                let w = a[r as usize];
                b.iter()
                    .position(|&x| x == w)
                    .map_or(UNDEFINED, |p| p as c_int)
            };
            // SAFETY: MPI requires ranks2 to hold n entries (checked non-null).
            unsafe { r2.add(i).write(t) };
        }
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Group_compare(
    g1: MpiGroup,
    g2: MpiGroup,
    result: *mut c_int,
) -> c_int {
    entry(Call::GroupCompare, COMM_WORLD, || {
        let a = group_of(g1)?;
        let b = group_of(g2)?;
        let r = match compare(&a, &b) {
            CONGRUENT => IDENT,
            x => x,
        };
        // SAFETY: `result` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(result, r, "result") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Group_free(group: *mut MpiGroup) -> c_int {
    entry(Call::GroupFree, COMM_WORLD, || {
        if group.is_null() {
            fail!(class::ARG, "group is NULL");
        }
        // SAFETY: non-null pointer to the caller's handle.
        let h = unsafe { *group };
        group_of(h)?;
        if h != GROUP_EMPTY {
            st().groups.remove(&h);
        }
        // SAFETY: `group` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(group, GROUP_NULL, "group") }
    })
}

/// `MPI_Comm_split_type`: `MPI_COMM_TYPE_SHARED` groups the ranks that share memory, which
/// today is every rank (strobe runs on one host); `MPI_UNDEFINED` gives `MPI_COMM_NULL`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_split_type(
    comm: MpiComm,
    split_type: c_int,
    key: c_int,
    info: c_int,
    out: *mut MpiComm,
) -> c_int {
    entry(Call::CommSplitType, comm, || {
        let c = comm_of(comm)?;
        if out.is_null() {
            fail!(class::ARG, "newcomm is NULL");
        }
        let colour = match split_type {
            UNDEFINED => None,
            COMM_TYPE_SHARED => Some(0),
            // MPI-4.0 7.4.2: strobe knows one hardware resource, the host's shared
            // memory (every rank of a job shares it); for any other resource, and for
            // the unguided split (no proper subset exists), the result is MPI_COMM_NULL.
            COMM_TYPE_HW_GUIDED => {
                let i = crate::info::info_of(info).ok();
                let r = i.as_ref().and_then(|i| i.get("mpi_hw_resource_type"));
                (r == Some("mpi_shared_memory")).then_some(0)
            }
            COMM_TYPE_HW_UNGUIDED => None,
            t => fail!(
                class::ARG,
                "unknown split_type {t} (strobe knows MPI_COMM_TYPE_SHARED, \
                 MPI_COMM_TYPE_HW_GUIDED and MPI_COMM_TYPE_HW_UNGUIDED)"
            ),
        };
        let s = c.split(colour, key)?;
        // SAFETY: `out` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(out, new_comm_handle(comm, s), "newcomm") }
    })
}

/// `MPI_Comm_get_parent`: strobe jobs are never spawned, so there is no parent.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_get_parent(parent: *mut MpiComm) -> c_int {
    entry(Call::CommGetParent, COMM_WORLD, || {
        crate::env::ready()?;
        // SAFETY: `parent` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(parent, COMM_NULL, "parent") }
    })
}

/// Prime factors of `n`, largest first.
fn factors(mut n: usize) -> Vec<usize> {
    let mut f = Vec::new();
    let mut p = 2;
    while p * p <= n {
        while n % p == 0 {
            f.push(p);
            n /= p;
        }
        p += 1;
    }
    if n > 1 {
        f.push(n);
    }
    f.reverse();
    f
}

/// The free dimensions of `MPI_Dims_create`: as balanced as possible, non-increasing.
pub fn balanced_dims(nnodes: usize, free: usize) -> Vec<usize> {
    let mut d = vec![1usize; free];
    if free == 0 {
        return d;
    }
    for p in factors(nnodes) {
        let i = (0..free).min_by_key(|&i| d[i]).unwrap_or(0);
        d[i] *= p;
    }
    d.sort_unstable_by(|a, b| b.cmp(a));
    d
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Dims_create(nnodes: c_int, ndims: c_int, dims: *mut c_int) -> c_int {
    entry(Call::DimsCreate, COMM_WORLD, || {
        let n = count(nnodes, "nnodes")?;
        let k = count(ndims, "ndims")?;
        if k > 0 && dims.is_null() {
            fail!(class::ARG, "dims is NULL");
        }
        // SAFETY: MPI requires dims to hold ndims entries (checked non-null).
        let d = if k == 0 {
            &mut [][..]
        } else {
            unsafe { std::slice::from_raw_parts_mut(dims, k) }
        };
        let mut fixed = 1usize;
        for &x in d.iter() {
            if x < 0 {
                fail!(class::DIMS, "dims contains the negative value {x}");
            }
            if x > 0 {
                fixed *= x as usize;
            }
        }
        if fixed == 0 || n % fixed != 0 {
            fail!(
                class::DIMS,
                "{n} nodes cannot be split with the fixed dimensions given"
            );
        }
        let free = d.iter().filter(|&&x| x == 0).count();
        if free == 0 && fixed != n {
            fail!(
                class::DIMS,
                "the fixed dimensions multiply to {fixed}, not {n}"
            );
        }
        let mut b = balanced_dims(n / fixed, free).into_iter();
        for x in d.iter_mut().filter(|x| **x == 0) {
            *x = b.next().unwrap_or(1) as c_int;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::balanced_dims;

    #[test]
    fn dims_are_balanced_and_non_increasing() {
        assert_eq!(balanced_dims(12, 2), vec![4, 3]);
        assert_eq!(balanced_dims(16, 2), vec![4, 4]);
        assert_eq!(balanced_dims(7, 2), vec![7, 1]);
        assert_eq!(balanced_dims(1, 3), vec![1, 1, 1]);
        assert_eq!(balanced_dims(24, 3), vec![4, 3, 2]);
        assert!(balanced_dims(5, 0).is_empty());
    }
}
