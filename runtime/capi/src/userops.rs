//! `MPI_Reduce_local` and user-defined ops (`MPI_Op_create`, `MPI_Op_free`,
//! `MPI_Op_commutative`); the reductions that use them are in `reduce.rs`.

use std::os::raw::{c_int, c_void};
use strobe_runtime::calls::Call;

use crate::consts::*;
use crate::datatype::comm_type;
use crate::error::{entry, fail};
use crate::reduce::{builtin, combine, copy_of, input, output, plan, Plan, OP_NAMES};
use crate::state::{self, st, UserOp};
use crate::util::{count, put};

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Reduce_local(
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    op: MpiOp,
) -> c_int {
    entry(Call::ReduceLocal, COMM_WORLD, || {
        let k = count(n, "count")?;
        let ty = comm_type(dt)?;
        let plan = plan(op, &ty)?;
        // SAFETY: `inbuf` is a C send buffer of the given count and type, valid until the operation
        // completes (MPI contract).
        let acc = unsafe { input(inbuf, inbuf, k, &ty) }?;
        // SAFETY: `inoutbuf` is a C send buffer of the given count and type, valid until the
        // operation completes (MPI contract).
        let mut x = unsafe { input(inoutbuf, inoutbuf, k, &ty) }?;
        match plan {
            Plan::Node(o, e) => {
                let mut a = copy_of(acc.as_slice());
                strobe_runtime::ops::reduce_into(o, e, a.as_mut_slice(), x.as_slice())
                    .map_err(|err| crate::error::MpiErr::new(class::OP, err.to_string()))?;
                x = a;
            }
            Plan::Local(l) => combine(l, &ty, dt, k, acc.as_slice(), &mut x)?,
        }
        // SAFETY: `inoutbuf` is a C receive buffer of the given count and type, untouched until the
        // operation completes (MPI contract).
        unsafe { output(&x, inoutbuf, k, &ty) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Op_create(f: *const c_void, commute: c_int, op: *mut MpiOp) -> c_int {
    entry(Call::OpCreate, COMM_WORLD, || {
        if f.is_null() {
            fail!(class::ARG, "user_fn is NULL");
        }
        if op.is_null() {
            fail!(class::ARG, "op is NULL");
        }
        // SAFETY: `op` is a C output argument: NULL or writable (MPI contract).
        unsafe {
            put(
                op,
                state::insert_op(UserOp {
                    func: f as usize,
                    commute: commute != 0,
                }),
                "op",
            )
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Op_free(op: *mut MpiOp) -> c_int {
    entry(Call::OpFree, COMM_WORLD, || {
        if op.is_null() {
            fail!(class::ARG, "op is NULL");
        }
        // SAFETY: non-null pointer to the caller's handle.
        let h = unsafe { *op };
        if (0..=LAST_PREDEFINED_OP).contains(&h) {
            fail!(
                class::OP,
                "{} is predefined and cannot be freed",
                OP_NAMES[h as usize]
            );
        }
        if st().ops.remove(&h).is_none() {
            fail!(class::OP, "invalid op handle {h}");
        }
        // SAFETY: `op` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(op, OP_NULL, "op") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Op_commutative(op: MpiOp, commute: *mut c_int) -> c_int {
    entry(Call::OpCommutative, COMM_WORLD, || {
        let v = if builtin(op).is_some() {
            true
        } else {
            match st().ops.get(&op) {
                Some(u) => u.commute,
                None => fail!(class::OP, "invalid op handle {op}"),
            }
        };
        // SAFETY: `commute` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(commute, v as c_int, "commute") }
    })
}
