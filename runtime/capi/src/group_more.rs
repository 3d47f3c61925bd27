//! Group set operations (MPI-3.1 6.3.2): `MPI_Group_union`, `MPI_Group_intersection`,
//! `MPI_Group_difference`, `MPI_Group_range_excl`. Groups are lists of world ranks
//! (`State::groups`); the results keep the orders MPI defines (the first group's, then
//! the second's for a union). An empty result is `MPI_GROUP_EMPTY`.

use std::os::raw::c_int;
use std::sync::Arc;
use strobe_runtime::calls::Call;

use crate::consts::*;
use crate::error::{entry, fail, MpiResult};
use crate::state::{insert_group, st};
use crate::util::{count, put};

fn group(h: MpiGroup) -> MpiResult<Arc<[u32]>> {
    if h == GROUP_NULL {
        fail!(class::GROUP, "MPI_GROUP_NULL is not a group");
    }
    match st().groups.get(&h) {
        Some(g) => Ok(g.clone()),
        None => fail!(class::GROUP, "invalid group handle {h}"),
    }
}

/// # Safety
/// `out` must be NULL or writable (a C output argument).
unsafe fn store(members: Vec<u32>, out: *mut MpiGroup) -> MpiResult {
    if out.is_null() {
        fail!(class::ARG, "newgroup is NULL");
    }
    // SAFETY: checked non-NULL above.
    unsafe { put(out, insert_group(Arc::from(members)), "newgroup") }
}

fn set_op(
    call: Call,
    a: MpiGroup,
    b: MpiGroup,
    out: *mut MpiGroup,
    f: fn(&[u32], &[u32]) -> Vec<u32>,
) -> c_int {
    entry(call, COMM_WORLD, || {
        let (ga, gb) = (group(a)?, group(b)?);
        // SAFETY: the caller's output argument (MPI contract).
        unsafe { store(f(&ga, &gb), out) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Group_union(a: MpiGroup, b: MpiGroup, out: *mut MpiGroup) -> c_int {
    set_op(Call::GroupUnion, a, b, out, |a, b| {
        let mut v = a.to_vec();
        v.extend(b.iter().filter(|r| !a.contains(r)));
        v
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Group_intersection(
    a: MpiGroup,
    b: MpiGroup,
    out: *mut MpiGroup,
) -> c_int {
    set_op(Call::GroupIntersection, a, b, out, |a, b| {
        a.iter().filter(|r| b.contains(r)).copied().collect()
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Group_difference(
    a: MpiGroup,
    b: MpiGroup,
    out: *mut MpiGroup,
) -> c_int {
    set_op(Call::GroupDifference, a, b, out, |a, b| {
        a.iter().filter(|r| !b.contains(r)).copied().collect()
    })
}

/// `MPI_Group_range_excl`: the members whose ranks are in none of the `(first, last,
/// stride)` triplets.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Group_range_excl(
    g: MpiGroup,
    n: c_int,
    ranges: *const [c_int; 3],
    out: *mut MpiGroup,
) -> c_int {
    entry(Call::GroupRangeExcl, COMM_WORLD, || {
        let members = group(g)?;
        let n = count(n, "n")?;
        // SAFETY: `ranges` holds `n` triplets (MPI contract).
        let r = unsafe { crate::util::array(ranges, n, "ranges") }?;
        let size = members.len() as i64;
        let mut drop = vec![false; members.len()];
        for &[first, last, stride] in r {
            if stride == 0 {
                fail!(class::ARG, "stride 0 in a rank range");
            }
            let (mut i, last, stride) = (first as i64, last as i64, stride as i64);
            while (stride > 0 && i <= last) || (stride < 0 && i >= last) {
                if !(0..size).contains(&i) {
                    fail!(class::RANK, "rank {i} out of the group of size {size}");
                }
                drop[i as usize] = true;
                i += stride;
            }
        }
        let kept = members
            .iter()
            .zip(&drop)
            .filter(|(_, d)| !**d)
            .map(|(m, _)| *m)
            .collect();
        // SAFETY: the caller's output argument (MPI contract).
        unsafe { store(kept, out) }
    })
}
