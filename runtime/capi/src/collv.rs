//! v-collectives and the all-to-all family: Gatherv, Scatterv, Allgather(v),
//! Alltoall(v) (`VBuf` lays per-rank blocks out for the runtime). Like `coll.rs`, each body
//! runs in a [`Mode`], blocking or nonblocking.

use crate::coll::{byte_type, check_root, own_block};
use crate::comm::comm_of;
use crate::consts::*;
use crate::datatype::{comm_type, TypeInfo};
use crate::error::{entry, fail, MpiResult};
use crate::icoll::{run, then, Mode, Outcome};
use crate::intercoll;
use crate::intercomm::inter_of;
use crate::p2p::{incoming, outgoing, Outgoing};
use crate::util::{array, count, in_place, raw_bytes_mut, Bytes};
use std::os::raw::{c_int, c_void};
use std::sync::Arc;
use strobe_runtime::calls::Call;

/// Per-rank (counts, displacements) of a v-collective, converted to bytes, over either the
/// user's buffer (contiguous type) or a packed copy with blocks laid end to end.
struct VBuf {
    counts: Vec<usize>,
    displs: Vec<usize>,
    packed: Option<Bytes>,
    direct: &'static mut [crate::util::RawByte],
    /// Per block: (packed offset, element displacement, element count) to unpack.
    blocks: Vec<(usize, isize, usize)>,
    base: *mut u8,
    ty: Arc<TypeInfo>,
}

impl VBuf {
    /// `fill`: pack the user's blocks (send side); otherwise start zeroed (receive side).
    ///
    /// # Safety
    /// `buf` must be NULL or hold the blocks `counts` and `displs` describe (in elements of
    /// `ty`), readable, and writable for the receive side, valid until the result is
    /// finished (MPI's rules for v-collective buffers).
    unsafe fn new(
        buf: *const c_void,
        counts: &[c_int],
        displs: &[c_int],
        ty: Arc<TypeInfo>,
        fill: bool,
    ) -> MpiResult<VBuf> {
        let mut ec = Vec::with_capacity(counts.len());
        for &k in counts {
            ec.push(count(k, "count")?);
        }
        if ty.extent == ty.size as isize && ty.dense_for(2) && displs.iter().all(|&d| d >= 0) {
            let end = ec
                .iter()
                .zip(displs)
                .map(|(k, d)| (k + *d as usize) * ty.size)
                .max()
                .unwrap_or(0);
            return Ok(VBuf {
                counts: ec.iter().map(|k| k * ty.size).collect(),
                displs: displs.iter().map(|&d| d as usize * ty.size).collect(),
                packed: None,
                // SAFETY: MPI's contract: the buffer covers every block.
                direct: unsafe { raw_bytes_mut(buf as *mut u8, end) },
                blocks: Vec::new(),
                base: buf as *mut u8,
                ty,
            });
        }
        let total: usize = ec.iter().sum::<usize>() * ty.size;
        let mut packed = Bytes::zeroed(total);
        let mut blocks = Vec::new();
        let mut at = 0;
        let mut pd = Vec::new();
        for (i, &k) in ec.iter().enumerate() {
            let d = displs[i] as isize;
            if fill {
                let src = (buf as *const u8).wrapping_offset(d * ty.extent);
                // SAFETY: MPI's contract: block i lies in the user's buffer.
                let p = unsafe { ty.pack(src, k) };
                packed.as_mut_slice()[at..at + p.len()].copy_from_slice(p.as_slice());
            }
            blocks.push((at, d, k));
            pd.push(at);
            at += k * ty.size;
        }
        Ok(VBuf {
            counts: ec.iter().map(|k| k * ty.size).collect(),
            displs: pd,
            direct: &mut [],
            packed: Some(packed),
            blocks,
            base: buf as *mut u8,
            ty,
        })
    }

    fn bytes(&mut self) -> &mut [crate::util::RawByte] {
        match &mut self.packed {
            Some(p) => p.as_raw_mut(),
            None => self.direct,
        }
    }

    fn finish(self) {
        let Some(p) = self.packed else { return };
        for (at, d, k) in self.blocks {
            let dst = self.base.wrapping_offset(d * self.ty.extent);
            // SAFETY: MPI's contract: block lies in the user's buffer.
            unsafe {
                self.ty
                    .unpack(&p.as_slice()[at..], k * self.ty.size, dst, k)
            };
        }
    }
}

/// A C input array of `n` ints (counts, displacements).
///
/// # Safety
/// As [`array`]: `p` is NULL or points at `n` ints valid for `'a`.
unsafe fn ints<'a>(p: *const c_int, n: usize, what: &str) -> MpiResult<&'a [c_int]> {
    // SAFETY: this function's contract.
    unsafe { array(p, n, what) }
}

/// # Safety
/// The buffers and arrays follow MPI's rules for `MPI_Gatherv`, valid until completion.
pub unsafe fn gatherv(
    mode: Mode,
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rcounts: *const c_int,
    displs: *const c_int,
    rdt: MpiDatatype,
    root: c_int,
    comm: MpiComm,
) -> MpiResult<Outcome> {
    if let Some(x) = inter_of(comm) {
        // SAFETY: this function's contract.
        return unsafe {
            intercoll::rooted(
                &x,
                false,
                (sbuf, sn, sdt),
                (rbuf, 0, rdt),
                Some((rcounts, displs)),
                root,
            )
        };
    }
    let c = comm_of(comm)?;
    check_root(&c, root)?;
    let n = c.size() as usize;
    if c.rank() != root {
        // SAFETY: `sbuf` is a C send buffer of the given count and type, valid until the
        // operation completes (MPI contract).
        let data = unsafe { outgoing(sbuf, count(sn, "sendcount")?, &*comm_type(sdt)?) }?;
        let posted = run(mode, || c.gatherv(data.bytes(), None, root))?;
        return then(posted, move || {
            drop(data);
            Ok(())
        });
    }
    let rt = comm_type(rdt)?;
    // SAFETY: `rcounts` is a C input array of `n` elements, or NULL (MPI contract).
    let rc = unsafe { ints(rcounts, n, "recvcounts") }?;
    // SAFETY: `displs` is a C input array of `n` elements, or NULL (MPI contract).
    let rd = unsafe { ints(displs, n, "displs") }?;
    let data = if in_place(sbuf) {
        let k = count(rc[root as usize], "recvcount")?;
        let at = (rbuf as *const u8).wrapping_offset(rd[root as usize] as isize * rt.extent);
        // SAFETY: MPI's contract: the root's block lies in its receive buffer.
        Outgoing::Packed(unsafe { rt.pack(at, k) })
    } else {
        // SAFETY: `sbuf` is a C send buffer of the given count and type, valid until the
        // operation completes (MPI contract).
        unsafe { outgoing(sbuf, count(sn, "sendcount")?, &*comm_type(sdt)?) }?
    };
    // SAFETY: `rbuf` is this C entry point's v-collective buffer, under MPI's rules for it.
    let mut v = unsafe { VBuf::new(rbuf, rc, rd, rt, false) }?;
    let (counts, ds) = (v.counts.clone(), v.displs.clone());
    let posted = run(mode, || {
        c.gatherv(data.bytes(), Some((v.bytes(), &counts, &ds)), root)
    })?;
    then(posted, move || {
        drop(data);
        v.finish();
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Gatherv(
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rcounts: *const c_int,
    displs: *const c_int,
    rdt: MpiDatatype,
    root: c_int,
    comm: MpiComm,
) -> c_int {
    entry(Call::Gatherv, comm, || {
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules.
        unsafe {
            gatherv(
                Mode::Blocking,
                sbuf,
                sn,
                sdt,
                rbuf,
                rcounts,
                displs,
                rdt,
                root,
                comm,
            )
        }
        .map(drop)
    })
}

/// # Safety
/// The buffers and arrays follow MPI's rules for `MPI_Scatterv`, valid until completion.
pub unsafe fn scatterv(
    mode: Mode,
    sbuf: *const c_void,
    scounts: *const c_int,
    displs: *const c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rn: c_int,
    rdt: MpiDatatype,
    root: c_int,
    comm: MpiComm,
) -> MpiResult<Outcome> {
    if let Some(x) = inter_of(comm) {
        // SAFETY: this function's contract.
        return unsafe {
            intercoll::rooted(
                &x,
                true,
                (rbuf, rn, rdt),
                (sbuf, 0, sdt),
                Some((scounts, displs)),
                root,
            )
        };
    }
    let c = comm_of(comm)?;
    check_root(&c, root)?;
    let n = c.size() as usize;
    let me_root = c.rank() == root;
    let mut v = if me_root {
        let st = comm_type(sdt)?;
        // SAFETY: `scounts` and `displs` are C input arrays of `n` elements, or NULL
        // (MPI contract).
        let (sc, sd) = unsafe { (ints(scounts, n, "sendcounts")?, ints(displs, n, "displs")?) };
        // SAFETY: `sbuf` is this C entry point's v-collective buffer, under MPI's rules for it.
        Some(unsafe { VBuf::new(sbuf, sc, sd, st, true) }?)
    } else {
        None
    };
    let (mut into, bytes) = if me_root && in_place(rbuf) {
        let per = v.as_ref().map_or(0, |v| v.counts[root as usize]);
        (
            crate::p2p::Incoming::Staged(crate::request::Unpack {
                tmp: Bytes::zeroed(per),
                base: 0,
                count: 0,
                ty: Arc::new(byte_type()),
            }),
            per,
        )
    } else {
        let rt = comm_type(rdt)?;
        let rk = count(rn, "recvcount")?;
        // SAFETY: `rbuf` is a C receive buffer of the given count and type, untouched until the
        // operation completes (MPI contract).
        (unsafe { incoming(rbuf, rk, &rt) }?, rk * rt.size)
    };
    let posted = run(mode, || match &mut v {
        Some(v) => {
            let (counts, ds) = (v.counts.clone(), v.displs.clone());
            let b: &[crate::util::RawByte] = v.bytes();
            c.scatterv(Some((b, &counts[..], &ds[..])), into.bytes(), root)
        }
        None => c.scatterv(None, into.bytes(), root),
    })?;
    then(posted, move || {
        drop(v);
        into.finish(bytes);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Scatterv(
    sbuf: *const c_void,
    scounts: *const c_int,
    displs: *const c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rn: c_int,
    rdt: MpiDatatype,
    root: c_int,
    comm: MpiComm,
) -> c_int {
    entry(Call::Scatterv, comm, || {
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules.
        unsafe {
            scatterv(
                Mode::Blocking,
                sbuf,
                scounts,
                displs,
                sdt,
                rbuf,
                rn,
                rdt,
                root,
                comm,
            )
        }
        .map(drop)
    })
}

/// # Safety
/// The buffers and arrays follow MPI's rules for `MPI_Allgather`, valid until completion.
pub unsafe fn allgather(
    mode: Mode,
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rn: c_int,
    rdt: MpiDatatype,
    comm: MpiComm,
) -> MpiResult<Outcome> {
    if let Some(x) = inter_of(comm) {
        // SAFETY: this function's contract.
        return unsafe { intercoll::allgather(&x, (sbuf, sn, sdt), (rbuf, rn, rdt), None) };
    }
    let c = comm_of(comm)?;
    let n = c.size() as usize;
    let rt = comm_type(rdt)?;
    let rk = count(rn, "recvcount")?;
    let data = if in_place(sbuf) {
        // SAFETY: `rbuf` is the receive buffer, which holds a block per rank (MPI contract).
        unsafe { own_block(rbuf, c.rank() as usize, rk, &rt) }
    } else {
        // SAFETY: `sbuf` is a C send buffer of the given count and type, valid until the
        // operation completes (MPI contract).
        unsafe { outgoing(sbuf, count(sn, "sendcount")?, &*comm_type(sdt)?) }?
    };
    if data.bytes().len() != rk * rt.size {
        fail!(
            class::TRUNCATE,
            "receiving {} bytes per rank but sending {}",
            rk * rt.size,
            data.bytes().len()
        );
    }
    // SAFETY: `rbuf` is a C receive buffer of the given count and type, untouched until the
    // operation completes (MPI contract).
    let mut into = unsafe { incoming(rbuf, rk * n, &rt) }?;
    let posted = run(mode, || c.allgather(data.bytes(), into.bytes()))?;
    then(posted, move || {
        drop(data);
        into.finish(rk * n * rt.size);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Allgather(
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rn: c_int,
    rdt: MpiDatatype,
    comm: MpiComm,
) -> c_int {
    entry(Call::Allgather, comm, || {
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules.
        unsafe { allgather(Mode::Blocking, sbuf, sn, sdt, rbuf, rn, rdt, comm) }.map(drop)
    })
}

/// # Safety
/// The buffers and arrays follow MPI's rules for `MPI_Allgatherv`, valid until completion.
pub unsafe fn allgatherv(
    mode: Mode,
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rcounts: *const c_int,
    displs: *const c_int,
    rdt: MpiDatatype,
    comm: MpiComm,
) -> MpiResult<Outcome> {
    if let Some(x) = inter_of(comm) {
        // SAFETY: this function's contract.
        return unsafe {
            intercoll::allgather(&x, (sbuf, sn, sdt), (rbuf, 0, rdt), Some((rcounts, displs)))
        };
    }
    let c = comm_of(comm)?;
    let n = c.size() as usize;
    let me = c.rank() as usize;
    let rt = comm_type(rdt)?;
    // SAFETY: `rcounts` is a C input array of `n` elements, or NULL (MPI contract).
    let rc = unsafe { ints(rcounts, n, "recvcounts") }?;
    // SAFETY: `displs` is a C input array of `n` elements, or NULL (MPI contract).
    let rd = unsafe { ints(displs, n, "displs") }?;
    let data = if in_place(sbuf) {
        let k = count(rc[me], "recvcount")?;
        let at = (rbuf as *const u8).wrapping_offset(rd[me] as isize * rt.extent);
        // SAFETY: MPI's contract: my block lies in the receive buffer.
        Outgoing::Packed(unsafe { rt.pack(at, k) })
    } else {
        // SAFETY: `sbuf` is a C send buffer of the given count and type, valid until the
        // operation completes (MPI contract).
        unsafe { outgoing(sbuf, count(sn, "sendcount")?, &*comm_type(sdt)?) }?
    };
    // SAFETY: `rbuf` is this C entry point's v-collective buffer, under MPI's rules for it.
    let mut v = unsafe { VBuf::new(rbuf, rc, rd, rt, false) }?;
    let (counts, ds) = (v.counts.clone(), v.displs.clone());
    if data.bytes().len() != counts[me] {
        fail!(
            class::TRUNCATE,
            "recvcounts[{me}] is {} bytes but this rank sends {}",
            counts[me],
            data.bytes().len()
        );
    }
    let posted = run(mode, || c.allgatherv(data.bytes(), v.bytes(), &counts, &ds))?;
    then(posted, move || {
        drop(data);
        v.finish();
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Allgatherv(
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rcounts: *const c_int,
    displs: *const c_int,
    rdt: MpiDatatype,
    comm: MpiComm,
) -> c_int {
    entry(Call::Allgatherv, comm, || {
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules.
        unsafe {
            allgatherv(
                Mode::Blocking,
                sbuf,
                sn,
                sdt,
                rbuf,
                rcounts,
                displs,
                rdt,
                comm,
            )
        }
        .map(drop)
    })
}

/// # Safety
/// The buffers and arrays follow MPI's rules for `MPI_Alltoall`, valid until completion.
pub unsafe fn alltoall(
    mode: Mode,
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rn: c_int,
    rdt: MpiDatatype,
    comm: MpiComm,
) -> MpiResult<Outcome> {
    if let Some(x) = inter_of(comm) {
        // SAFETY: this function's contract.
        return unsafe { intercoll::alltoall(&x, (sbuf, sn, sdt), (rbuf, rn, rdt), None) };
    }
    let c = comm_of(comm)?;
    let n = c.size() as usize;
    let rt = comm_type(rdt)?;
    let rk = count(rn, "recvcount")?;
    let data = if in_place(sbuf) {
        // SAFETY: the receive buffer holds n blocks of rk elements (MPI contract).
        Outgoing::Packed(unsafe { rt.pack(rbuf as *const u8, rk * n) })
    } else {
        // SAFETY: `sbuf` is a C send buffer of the given count and type, valid until the
        // operation completes (MPI contract).
        unsafe { outgoing(sbuf, count(sn, "sendcount")? * n, &*comm_type(sdt)?) }?
    };
    if data.bytes().len() != rk * n * rt.size {
        fail!(
            class::TRUNCATE,
            "receiving {} bytes per rank but sending {}",
            rk * rt.size,
            data.bytes().len() / n.max(1)
        );
    }
    // SAFETY: `rbuf` is a C receive buffer of the given count and type, untouched until the
    // operation completes (MPI contract).
    let mut into = unsafe { incoming(rbuf, rk * n, &rt) }?;
    let posted = run(mode, || c.alltoall(data.bytes(), into.bytes()))?;
    then(posted, move || {
        drop(data);
        into.finish(rk * n * rt.size);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Alltoall(
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rn: c_int,
    rdt: MpiDatatype,
    comm: MpiComm,
) -> c_int {
    entry(Call::Alltoall, comm, || {
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules.
        unsafe { alltoall(Mode::Blocking, sbuf, sn, sdt, rbuf, rn, rdt, comm) }.map(drop)
    })
}

/// # Safety
/// The buffers and arrays follow MPI's rules for `MPI_Alltoallv`, valid until completion.
pub unsafe fn alltoallv(
    mode: Mode,
    sbuf: *const c_void,
    scounts: *const c_int,
    sdispls: *const c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rcounts: *const c_int,
    rdispls: *const c_int,
    rdt: MpiDatatype,
    comm: MpiComm,
) -> MpiResult<Outcome> {
    if let Some(x) = inter_of(comm) {
        // SAFETY: this function's contract.
        return unsafe {
            intercoll::alltoall(
                &x,
                (sbuf, 0, sdt),
                (rbuf, 0, rdt),
                Some([scounts, sdispls, rcounts, rdispls]),
            )
        };
    }
    let c = comm_of(comm)?;
    let n = c.size() as usize;
    let rt = comm_type(rdt)?;
    // SAFETY: `rcounts` is a C input array of `n` elements, or NULL (MPI contract).
    let rc = unsafe { ints(rcounts, n, "recvcounts") }?;
    // SAFETY: `rdispls` is a C input array of `n` elements, or NULL (MPI contract).
    let rd = unsafe { ints(rdispls, n, "rdispls") }?;
    let mut s = if in_place(sbuf) {
        // SAFETY: `rbuf` is this C entry point's v-collective buffer, under MPI's rules for it.
        unsafe { VBuf::new(rbuf, rc, rd, rt.clone(), true) }.map(|mut v| {
            // In place: the outgoing blocks must be a copy of the receive buffer.
            if v.packed.is_none() {
                let mut p = Bytes::zeroed(v.direct.len());
                // SAFETY: RawByte is a transparent u8.
                p.as_mut_slice().copy_from_slice(unsafe {
                    std::slice::from_raw_parts(v.direct.as_ptr() as *const u8, v.direct.len())
                });
                v.packed = Some(p);
            }
            v
        })?
    } else {
        // SAFETY: `scounts` and `sdispls` are C input arrays of `n` elements, or NULL
        // (MPI contract).
        let (sc, sd) = unsafe {
            (
                ints(scounts, n, "sendcounts")?,
                ints(sdispls, n, "sdispls")?,
            )
        };
        // SAFETY: `sbuf` is this C entry point's v-collective buffer, under MPI's rules for it.
        unsafe { VBuf::new(sbuf, sc, sd, comm_type(sdt)?, true) }?
    };
    // SAFETY: `rbuf` is this C entry point's v-collective buffer, under MPI's rules for it.
    let mut r = unsafe { VBuf::new(rbuf, rc, rd, rt, false) }?;
    let (sc, sd, rcb, rdb) = (
        s.counts.clone(),
        s.displs.clone(),
        r.counts.clone(),
        r.displs.clone(),
    );
    let posted = run(mode, || {
        let sb: &[crate::util::RawByte] = s.bytes();
        c.alltoallv(sb, &sc, &sd, r.bytes(), &rcb, &rdb)
    })?;
    then(posted, move || {
        drop(s);
        r.finish();
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Alltoallv(
    sbuf: *const c_void,
    scounts: *const c_int,
    sdispls: *const c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rcounts: *const c_int,
    rdispls: *const c_int,
    rdt: MpiDatatype,
    comm: MpiComm,
) -> c_int {
    entry(Call::Alltoallv, comm, || {
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules.
        unsafe {
            alltoallv(
                Mode::Blocking,
                sbuf,
                scounts,
                sdispls,
                sdt,
                rbuf,
                rcounts,
                rdispls,
                rdt,
                comm,
            )
        }
        .map(drop)
    })
}
