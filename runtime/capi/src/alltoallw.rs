//! `MPI_Alltoallw` and `MPI_Ialltoallw`: per-peer datatypes and byte displacements.
//!
//! The runtime moves bytes: every outgoing block is packed with its own datatype into one
//! contiguous buffer, the runtime's Alltoallv (byte counts, blocks end to end) exchanges
//! them, and every incoming block is unpacked with its own datatype at its byte
//! displacement. So the scheduler sees an ordinary Alltoallv, and the blocking call is
//! measured as one.

use std::os::raw::{c_int, c_void};
use std::sync::Arc;

use strobe_runtime::calls::Call;

use crate::comm::comm_of;
use crate::consts::*;
use crate::datatype::{comm_type, TypeInfo};
use crate::error::{entry, fail, MpiResult};
use crate::icoll::{run, then, Mode, Outcome};
use crate::util::{array, count, in_place, Bytes};

/// One side of the exchange: per-peer element counts, byte displacements and types.
struct Side {
    counts: Vec<usize>,
    displs: Vec<isize>,
    types: Vec<Arc<TypeInfo>>,
}

impl Side {
    /// # Safety
    /// Each array is NULL or holds `n` entries (MPI's rules for `MPI_Alltoallw`).
    unsafe fn read(
        n: usize,
        counts: *const c_int,
        displs: *const c_int,
        types: *const MpiDatatype,
        what: &str,
    ) -> MpiResult<Side> {
        // SAFETY: this function's contract.
        let (c, d, t) = unsafe {
            (
                array(counts, n, &format!("{what}counts"))?,
                array(displs, n, &format!("{what}displs"))?,
                array(types, n, &format!("{what}types"))?,
            )
        };
        let mut side = Side {
            counts: Vec::with_capacity(n),
            displs: d.iter().map(|&x| x as isize).collect(),
            types: Vec::with_capacity(n),
        };
        for i in 0..n {
            side.counts.push(count(c[i], "count")?);
            side.types.push(comm_type(t[i])?);
        }
        Ok(side)
    }

    /// Bytes of each block, and where it starts in the packed buffer.
    fn layout(&self) -> (Vec<usize>, Vec<usize>) {
        let sizes: Vec<usize> = self
            .counts
            .iter()
            .zip(&self.types)
            .map(|(k, t)| k * t.size)
            .collect();
        let mut at = 0;
        let starts = sizes
            .iter()
            .map(|s| {
                let here = at;
                at += s;
                here
            })
            .collect();
        (sizes, starts)
    }

    /// Pack every block of `buf` end to end.
    ///
    /// # Safety
    /// `buf` must hold every block this side describes, readable.
    unsafe fn pack(&self, buf: *const c_void) -> Bytes {
        let (sizes, starts) = self.layout();
        let mut out = Bytes::zeroed(sizes.iter().sum());
        for i in 0..self.counts.len() {
            let at = (buf as *const u8).wrapping_offset(self.displs[i]);
            // SAFETY: MPI's contract: block i lies in the user's buffer.
            let p = unsafe { self.types[i].pack(at, self.counts[i]) };
            out.as_mut_slice()[starts[i]..starts[i] + sizes[i]].copy_from_slice(p.as_slice());
        }
        out
    }

    /// Unpack every block of `packed` into `buf`.
    ///
    /// # Safety
    /// `buf` must hold every block this side describes, writable.
    unsafe fn unpack(&self, packed: &Bytes, buf: *mut c_void) {
        let (sizes, starts) = self.layout();
        for i in 0..self.counts.len() {
            let at = (buf as *mut u8).wrapping_offset(self.displs[i]);
            let src = &packed.as_slice()[starts[i]..starts[i] + sizes[i]];
            // SAFETY: MPI's contract: block i lies in the user's buffer.
            unsafe { self.types[i].unpack(src, sizes[i], at, self.counts[i]) };
        }
    }
}

/// # Safety
/// The buffers and arrays follow MPI's rules for `MPI_Alltoallw`, valid until completion.
pub unsafe fn alltoallw(
    mode: Mode,
    sbuf: *const c_void,
    scounts: *const c_int,
    sdispls: *const c_int,
    stypes: *const MpiDatatype,
    rbuf: *mut c_void,
    rcounts: *const c_int,
    rdispls: *const c_int,
    rtypes: *const MpiDatatype,
    comm: MpiComm,
) -> MpiResult<Outcome> {
    if let Some(x) = crate::intercomm::inter_of(comm) {
        // SAFETY: this function's contract.
        return unsafe {
            crate::intercoll::alltoallw(
                &x,
                (sbuf, scounts, sdispls, stypes),
                (rbuf, rcounts, rdispls, rtypes),
            )
        };
    }
    let c = comm_of(comm)?;
    let n = c.size() as usize;
    // SAFETY: the arrays are the caller's, `n` entries each (MPI contract).
    let recv = unsafe { Side::read(n, rcounts, rdispls, rtypes, "recv") }?;
    if in_place(rbuf) {
        fail!(
            class::BUFFER,
            "MPI_IN_PLACE is not allowed as the receive buffer"
        );
    }
    let send = if in_place(sbuf) {
        None
    } else {
        // SAFETY: the arrays are the caller's, `n` entries each (MPI contract).
        Some(unsafe { Side::read(n, scounts, sdispls, stypes, "send") }?)
    };
    // In place, the outgoing blocks are the receive buffer's, as the receive side describes
    // them.
    let (from, base) = match &send {
        Some(s) => (s, sbuf),
        None => (&recv, rbuf as *const c_void),
    };
    // SAFETY: the buffer holds every block it describes (MPI contract).
    let mut out = unsafe { from.pack(base) };
    let (ssizes, sstarts) = from.layout();
    let (rsizes, rstarts) = recv.layout();
    let mut into = Bytes::zeroed(rsizes.iter().sum());
    let posted = run(mode, || {
        c.alltoallv(
            out.as_raw_mut(),
            &ssizes,
            &sstarts,
            into.as_raw_mut(),
            &rsizes,
            &rstarts,
        )
    })?;
    then(posted, move || {
        drop(out);
        // SAFETY: the receive buffer holds every block, untouched until completion (MPI
        // contract).
        unsafe { recv.unpack(&into, rbuf) };
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Alltoallw(
    sbuf: *const c_void,
    scounts: *const c_int,
    sdispls: *const c_int,
    stypes: *const MpiDatatype,
    rbuf: *mut c_void,
    rcounts: *const c_int,
    rdispls: *const c_int,
    rtypes: *const MpiDatatype,
    comm: MpiComm,
) -> c_int {
    entry(Call::Alltoallw, comm, || {
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules.
        unsafe {
            alltoallw(
                Mode::Blocking,
                sbuf,
                scounts,
                sdispls,
                stypes,
                rbuf,
                rcounts,
                rdispls,
                rtypes,
                comm,
            )
        }
        .map(drop)
    })
}
