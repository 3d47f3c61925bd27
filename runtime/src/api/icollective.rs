//! Nonblocking collectives on a [`Comm`], posted in a [`Scope`] like `isend`/`irecv`:
//! the buffers are borrowed for the whole scope, and the request completes with
//! `wait`/`test` and friends. Each is the blocking call's descriptor posted without
//! waiting ([`super::post_unscoped`]), so the results are the blocking call's, bit for bit.
//! (The v-variants, whose count tables must outlive the call, are the C ABI's only.)
//!
//! ```no_run
//! use strobe_runtime::api::{self, ReduceOp};
//! let world = api::init().expect("init");
//! let mine = [world.rank() as f64; 4];
//! let mut sum = [0.0f64; 4];
//! api::scope(|s| -> api::Result<()> {
//!     let r = world.iallreduce(s, &mine, &mut sum, ReduceOp::Sum)?;
//!     let b = world.ibarrier(s)?;
//!     api::wait_all(vec![r, b])?;
//!     Ok(())
//! })
//! .expect("iallreduce");
//! api::finalize();
//! ```

use super::request::{Request, Scope};
use super::{post_unscoped, Comm, Equivalence, ReduceOp, Result};

impl Comm {
    /// Post the one collective `post` makes, as a request of scope `s`.
    fn icollective<'scope>(
        &self,
        s: &'scope Scope<'scope, '_>,
        post: impl FnOnce() -> Result<()>,
    ) -> Result<Request<'scope>> {
        // SAFETY: every buffer `post` hands the runtime is borrowed for the whole scope
        // `s` (the public methods below take `&'scope` buffers), and the scope does not end
        // before the request completes; the calls used here keep no count tables.
        let p = unsafe { post_unscoped(post) }?;
        Ok(s.adopt(p.id(), p.kind()))
    }

    /// `MPI_Ibarrier`.
    #[track_caller]
    pub fn ibarrier<'scope>(&self, s: &'scope Scope<'scope, '_>) -> Result<Request<'scope>> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        self.icollective(s, || self.barrier())
    }

    /// `MPI_Ibcast` of `buf` from `root`.
    #[track_caller]
    pub fn ibcast<'scope, T: Equivalence>(
        &self,
        s: &'scope Scope<'scope, '_>,
        buf: &'scope mut [T],
        root: i32,
    ) -> Result<Request<'scope>> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        self.icollective(s, || self.bcast(buf, root))
    }

    /// `MPI_Ireduce`: `recv` is used at the root only (and required there).
    #[track_caller]
    pub fn ireduce<'scope, T: Equivalence>(
        &self,
        s: &'scope Scope<'scope, '_>,
        send: &'scope [T],
        recv: Option<&'scope mut [T]>,
        op: ReduceOp,
        root: i32,
    ) -> Result<Request<'scope>> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        self.icollective(s, || self.reduce(send, recv, op, root))
    }

    /// `MPI_Iallreduce`.
    #[track_caller]
    pub fn iallreduce<'scope, T: Equivalence>(
        &self,
        s: &'scope Scope<'scope, '_>,
        send: &'scope [T],
        recv: &'scope mut [T],
        op: ReduceOp,
    ) -> Result<Request<'scope>> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        self.icollective(s, || self.allreduce(send, recv, op))
    }

    /// `MPI_Iscan`.
    #[track_caller]
    pub fn iscan<'scope, T: Equivalence>(
        &self,
        s: &'scope Scope<'scope, '_>,
        send: &'scope [T],
        recv: &'scope mut [T],
        op: ReduceOp,
    ) -> Result<Request<'scope>> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        self.icollective(s, || self.scan(send, recv, op))
    }

    /// `MPI_Iexscan`.
    #[track_caller]
    pub fn iexscan<'scope, T: Equivalence>(
        &self,
        s: &'scope Scope<'scope, '_>,
        send: &'scope [T],
        recv: &'scope mut [T],
        op: ReduceOp,
    ) -> Result<Request<'scope>> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        self.icollective(s, || self.exscan(send, recv, op))
    }

    /// `MPI_Igather`.
    #[track_caller]
    pub fn igather<'scope, T: Equivalence>(
        &self,
        s: &'scope Scope<'scope, '_>,
        send: &'scope [T],
        recv: Option<&'scope mut [T]>,
        root: i32,
    ) -> Result<Request<'scope>> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        self.icollective(s, || self.gather(send, recv, root))
    }

    /// `MPI_Iscatter`.
    #[track_caller]
    pub fn iscatter<'scope, T: Equivalence>(
        &self,
        s: &'scope Scope<'scope, '_>,
        send: Option<&'scope [T]>,
        recv: &'scope mut [T],
        root: i32,
    ) -> Result<Request<'scope>> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        self.icollective(s, || self.scatter(send, recv, root))
    }

    /// `MPI_Iallgather`.
    #[track_caller]
    pub fn iallgather<'scope, T: Equivalence>(
        &self,
        s: &'scope Scope<'scope, '_>,
        send: &'scope [T],
        recv: &'scope mut [T],
    ) -> Result<Request<'scope>> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        self.icollective(s, || self.allgather(send, recv))
    }

    /// `MPI_Ialltoall`.
    #[track_caller]
    pub fn ialltoall<'scope, T: Equivalence>(
        &self,
        s: &'scope Scope<'scope, '_>,
        send: &'scope [T],
        recv: &'scope mut [T],
    ) -> Result<Request<'scope>> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        self.icollective(s, || self.alltoall(send, recv))
    }

    /// `MPI_Ireduce_scatter_block`.
    #[track_caller]
    pub fn ireduce_scatter_block<'scope, T: Equivalence>(
        &self,
        s: &'scope Scope<'scope, '_>,
        send: &'scope [T],
        recv: &'scope mut [T],
        op: ReduceOp,
    ) -> Result<Request<'scope>> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        self.icollective(s, || self.reduce_scatter_block(send, recv, op))
    }
}
