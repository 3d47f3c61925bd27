//! The one table of MPI calls the product knows.
//!
//! [`for_each_mpi_call!`](crate::for_each_mpi_call) holds every MPI function once: its
//! identifier, its C name (without the `MPI_` prefix), whether the MMDS measures it and, if
//! so, its primitive slot. Every list of MPI functions is derived from it:
//!
//! - [`Primitive`], the measured calls, whose values are slots in the MMDS block and are
//!   stored in recordings: **append only, never renumber**;
//! - [`Call`], every C entry point, which `strobe-mpi`'s `error::entry` takes (a typed
//!   identity: no string lookup per call; [`Call::primitive`] is a `match`);
//! - the weak `MPI_*` aliases of `strobe-mpi` (`runtime/capi/src/abi.rs` passes its alias
//!   macro to [`for_each_mpi_call!`](crate::for_each_mpi_call));
//! - the prototypes `runtime/capi/include/mpi.h` must declare (a test in `strobe-mpi`
//!   compares the header with [`Call::ALL`], both ways).
//!
//! To add an MPI function: add a line here (a measured one takes the next free slot below
//! [`crate::mmds::PRIMITIVE_SLOTS`]), declare it in `mpi.h` if it has a C entry point, and
//! implement `PMPI_name`.

/// Calls `$callback! { measured { .. } measured_without_c_abi { .. } local { .. } }` with
/// the table of MPI calls:
///
/// - `measured`: `Ident = slot "C_name",`: measured (an MMDS slot) with a C entry point;
/// - `measured_without_c_abi`: the same for primitives that have a slot reserved but no C
///   entry point (yet);
/// - `local`: `Ident "C_name",`: C entry points that are not measured (their time stays
///   computation: `MPI_Comm_rank`, datatype constructors, ...).
///
/// Identifiers are the C name in CamelCase without underscores (a test checks it).
#[macro_export]
macro_rules! for_each_mpi_call {
    ($callback:ident) => {
        $callback! {
            measured {
                Init = 0 "Init",
                Finalize = 1 "Finalize",
                Abort = 2 "Abort",
                Wtime = 3 "Wtime",
                Send = 4 "Send",
                Ssend = 5 "Ssend",
                Rsend = 6 "Rsend",
                Recv = 7 "Recv",
                Isend = 8 "Isend",
                Issend = 9 "Issend",
                Irsend = 10 "Irsend",
                Irecv = 11 "Irecv",
                Sendrecv = 12 "Sendrecv",
                SendrecvReplace = 13 "Sendrecv_replace",
                Probe = 14 "Probe",
                Iprobe = 15 "Iprobe",
                Cancel = 16 "Cancel",
                Wait = 17 "Wait",
                Waitall = 18 "Waitall",
                Waitany = 19 "Waitany",
                Waitsome = 20 "Waitsome",
                Test = 21 "Test",
                Testall = 22 "Testall",
                Testany = 23 "Testany",
                Testsome = 24 "Testsome",
                Barrier = 25 "Barrier",
                Bcast = 26 "Bcast",
                Reduce = 27 "Reduce",
                Allreduce = 28 "Allreduce",
                Scan = 29 "Scan",
                Exscan = 30 "Exscan",
                ReduceScatter = 31 "Reduce_scatter",
                ReduceScatterBlock = 32 "Reduce_scatter_block",
                Scatter = 33 "Scatter",
                Scatterv = 34 "Scatterv",
                Gather = 35 "Gather",
                Gatherv = 36 "Gatherv",
                Allgather = 37 "Allgather",
                Allgatherv = 38 "Allgatherv",
                Alltoall = 39 "Alltoall",
                Alltoallv = 40 "Alltoallv",
                CommDup = 41 "Comm_dup",
                CommSplit = 42 "Comm_split",
                CommFree = 43 "Comm_free",
                RequestFree = 44 "Request_free",
                Bsend = 45 "Bsend",
                CommCreate = 47 "Comm_create",
                CommCreateGroup = 48 "Comm_create_group",
                CommSplitType = 49 "Comm_split_type",
                BufferDetach = 50 "Buffer_detach",
                InitThread = 51 "Init_thread",
                // ---- mpireq: MPI-3 requests (slot 46 was reserved for it)
                Ibsend = 46 "Ibsend",
            }
            measured_without_c_abi {
            }
            local {
                QueryThread "Query_thread",
                IsThreadMain "Is_thread_main",
                Initialized "Initialized",
                Finalized "Finalized",
                GetProcessorName "Get_processor_name",
                GetVersion "Get_version",
                GetLibraryVersion "Get_library_version",
                Wtick "Wtick",
                AllocMem "Alloc_mem",
                FreeMem "Free_mem",
                ErrorString "Error_string",
                ErrorClass "Error_class",
                CommSetErrhandler "Comm_set_errhandler",
                CommGetErrhandler "Comm_get_errhandler",
                ErrhandlerFree "Errhandler_free",
                BufferAttach "Buffer_attach",
                GetCount "Get_count",
                TestCancelled "Test_cancelled",
                ReduceLocal "Reduce_local",
                OpCreate "Op_create",
                OpFree "Op_free",
                OpCommutative "Op_commutative",
                TypeContiguous "Type_contiguous",
                TypeVector "Type_vector",
                TypeCreateHvector "Type_create_hvector",
                TypeIndexed "Type_indexed",
                TypeCreateHindexed "Type_create_hindexed",
                TypeCreateIndexedBlock "Type_create_indexed_block",
                TypeCreateStruct "Type_create_struct",
                TypeCreateResized "Type_create_resized",
                TypeDup "Type_dup",
                TypeCommit "Type_commit",
                TypeFree "Type_free",
                TypeSize "Type_size",
                TypeGetExtent "Type_get_extent",
                TypeGetTrueExtent "Type_get_true_extent",
                TypeGetEnvelope "Type_get_envelope",
                GetAddress "Get_address",
                Pack "Pack",
                Unpack "Unpack",
                PackSize "Pack_size",
                CommRank "Comm_rank",
                CommSize "Comm_size",
                CommGetParent "Comm_get_parent",
                DimsCreate "Dims_create",
                CommCompare "Comm_compare",
                CommGroup "Comm_group",
                CommTestInter "Comm_test_inter",
                CommRemoteSize "Comm_remote_size",
                CommSetName "Comm_set_name",
                CommGetName "Comm_get_name",
                CommCreateKeyval "Comm_create_keyval",
                CommFreeKeyval "Comm_free_keyval",
                CommSetAttr "Comm_set_attr",
                CommGetAttr "Comm_get_attr",
                CommDeleteAttr "Comm_delete_attr",
                AttrGet "Attr_get",
                GroupSize "Group_size",
                GroupRank "Group_rank",
                GroupIncl "Group_incl",
                GroupExcl "Group_excl",
                GroupRangeIncl "Group_range_incl",
                GroupTranslateRanks "Group_translate_ranks",
                GroupCompare "Group_compare",
                GroupFree "Group_free",
                // Language interoperability (MPI-3.1 17.2.4): handle and status
                // conversions between C and Fortran, implemented by strobe-mpi's Fortran
                // binding (`runtime/capi/src/fortran/handles.rs`).
                CommF2c "Comm_f2c",
                CommC2f "Comm_c2f",
                TypeF2c "Type_f2c",
                TypeC2f "Type_c2f",
                GroupF2c "Group_f2c",
                GroupC2f "Group_c2f",
                OpF2c "Op_f2c",
                OpC2f "Op_c2f",
                RequestF2c "Request_f2c",
                RequestC2f "Request_c2f",
                ErrhandlerF2c "Errhandler_f2c",
                ErrhandlerC2f "Errhandler_c2f",
                InfoF2c "Info_f2c",
                InfoC2f "Info_c2f",
                StatusF2c "Status_f2c",
                StatusC2f "Status_c2f",
                // Nonblocking collectives and Alltoallw (strobe-mpi's icoll.rs): posting
                // is not measured; the time is the Wait's that completes them, and the
                // blocking Alltoallw is measured as the Alltoallv it runs.
                Ibarrier "Ibarrier",
                Ibcast "Ibcast",
                Ireduce "Ireduce",
                Iallreduce "Iallreduce",
                Iscan "Iscan",
                Iexscan "Iexscan",
                IreduceScatter "Ireduce_scatter",
                IreduceScatterBlock "Ireduce_scatter_block",
                Igather "Igather",
                Igatherv "Igatherv",
                Iscatter "Iscatter",
                Iscatterv "Iscatterv",
                Iallgather "Iallgather",
                Iallgatherv "Iallgatherv",
                Ialltoall "Ialltoall",
                Ialltoallv "Ialltoallv",
                Ialltoallw "Ialltoallw",
                Alltoallw "Alltoallw",
                // Intercommunicators (strobe-mpi's intercomm.rs).
                IntercommCreate "Intercomm_create",
                IntercommMerge "Intercomm_merge",
                CommRemoteGroup "Comm_remote_group",
                // ---- mpireq: persistent, generalized and matched-probe requests, Info.
                // Not measured: they post what the Isend/Irecv/Probe they stand for post
                // (measured as those), or are local.
                SendInit "Send_init",
                SsendInit "Ssend_init",
                RsendInit "Rsend_init",
                BsendInit "Bsend_init",
                RecvInit "Recv_init",
                Start "Start",
                Startall "Startall",
                RequestGetStatus "Request_get_status",
                Isendrecv "Isendrecv",
                IsendrecvReplace "Isendrecv_replace",
                Mprobe "Mprobe",
                Improbe "Improbe",
                Mrecv "Mrecv",
                Imrecv "Imrecv",
                GrequestStart "Grequest_start",
                GrequestComplete "Grequest_complete",
                StatusSetElements "Status_set_elements",
                StatusSetElementsX "Status_set_elements_x",
                StatusSetCancelled "Status_set_cancelled",
                InfoCreate "Info_create",
                InfoSet "Info_set",
                InfoDelete "Info_delete",
                InfoGet "Info_get",
                InfoGetString "Info_get_string",
                InfoGetValuelen "Info_get_valuelen",
                InfoGetNkeys "Info_get_nkeys",
                InfoGetNthkey "Info_get_nthkey",
                InfoDup "Info_dup",
                InfoFree "Info_free",
                CommSetInfo "Comm_set_info",
                CommGetInfo "Comm_get_info",
                CommDupWithInfo "Comm_dup_with_info",
                MessageF2c "Message_f2c",
                MessageC2f "Message_c2f",
                KeyvalCreate "Keyval_create",
                KeyvalFree "Keyval_free",
                AttrPut "Attr_put",
                AttrDelete "Attr_delete",
                TypeCreateKeyval "Type_create_keyval",
                TypeFreeKeyval "Type_free_keyval",
                TypeSetAttr "Type_set_attr",
                TypeGetAttr "Type_get_attr",
                TypeDeleteAttr "Type_delete_attr",
                GetElements "Get_elements",
                GetElementsX "Get_elements_x",
                TypeSizeX "Type_size_x",
                TypeGetExtentX "Type_get_extent_x",
                TypeGetTrueExtentX "Type_get_true_extent_x",
                TypeExtent "Type_extent",
                TypeLb "Type_lb",
                TypeUb "Type_ub",
                TypeHvector "Type_hvector",
                TypeHindexed "Type_hindexed",
                TypeStruct "Type_struct",
                TypeCreateHindexedBlock "Type_create_hindexed_block",
                TypeCreateSubarray "Type_create_subarray",
                TypeSetName "Type_set_name",
                TypeGetName "Type_get_name",
                // mpi13b (issue 13): datatype contents, external32, darray.
                TypeGetContents "Type_get_contents",
                TypeMatchSize "Type_match_size",
                PackExternal "Pack_external",
                PackExternalSize "Pack_external_size",
                UnpackExternal "Unpack_external",
                TypeCreateDarray "Type_create_darray",
                TypeCreateF90Integer "Type_create_f90_integer",
                TypeCreateF90Real "Type_create_f90_real",
                TypeCreateF90Complex "Type_create_f90_complex",
                CommCreateErrhandler "Comm_create_errhandler",
                ErrhandlerCreate "Errhandler_create",
                ErrhandlerSet "Errhandler_set",
                ErrhandlerGet "Errhandler_get",
                CommCallErrhandler "Comm_call_errhandler",
                AddErrorClass "Add_error_class",
                AddErrorCode "Add_error_code",
                AddErrorString "Add_error_string",
                GroupUnion "Group_union",
                GroupIntersection "Group_intersection",
                GroupDifference "Group_difference",
                GroupRangeExcl "Group_range_excl",
                // ---- issue 13 (mpi13a): MPI-4 persistent collectives (strobe-mpi's pcoll.rs;
                // not measured: Start posts the nonblocking collective), Comm_idup (idup.rs).
                BarrierInit "Barrier_init",
                BcastInit "Bcast_init",
                ReduceInit "Reduce_init",
                AllreduceInit "Allreduce_init",
                ScanInit "Scan_init",
                ExscanInit "Exscan_init",
                ReduceScatterInit "Reduce_scatter_init",
                ReduceScatterBlockInit "Reduce_scatter_block_init",
                GatherInit "Gather_init",
                GathervInit "Gatherv_init",
                ScatterInit "Scatter_init",
                ScattervInit "Scatterv_init",
                AllgatherInit "Allgather_init",
                AllgathervInit "Allgatherv_init",
                AlltoallInit "Alltoall_init",
                AlltoallvInit "Alltoallv_init",
                AlltoallwInit "Alltoallw_init",
                CommIdup "Comm_idup",
                CommIdupWithInfo "Comm_idup_with_info",
                // Topologies (topo.rs, topo_dist.rs) and neighbour collectives (neighbor.rs):
                // not measured; the neighbour transfers are measured as the Isend/Irecv they post.
                CartCreate "Cart_create",
                CartCoords "Cart_coords",
                CartRank "Cart_rank",
                CartShift "Cart_shift",
                CartSub "Cart_sub",
                CartGet "Cart_get",
                CartMap "Cart_map",
                CartdimGet "Cartdim_get",
                GraphCreate "Graph_create",
                GraphGet "Graph_get",
                GraphNeighbors "Graph_neighbors",
                GraphNeighborsCount "Graph_neighbors_count",
                GraphMap "Graph_map",
                GraphdimsGet "Graphdims_get",
                DistGraphCreate "Dist_graph_create",
                DistGraphCreateAdjacent "Dist_graph_create_adjacent",
                DistGraphNeighbors "Dist_graph_neighbors",
                DistGraphNeighborsCount "Dist_graph_neighbors_count",
                TopoTest "Topo_test",
                NeighborAllgather "Neighbor_allgather",
                NeighborAllgatherv "Neighbor_allgatherv",
                NeighborAlltoall "Neighbor_alltoall",
                NeighborAlltoallv "Neighbor_alltoallv",
                NeighborAlltoallw "Neighbor_alltoallw",
                IneighborAllgather "Ineighbor_allgather",
                IneighborAllgatherv "Ineighbor_allgatherv",
                IneighborAlltoall "Ineighbor_alltoall",
                IneighborAlltoallv "Ineighbor_alltoallv",
                IneighborAlltoallw "Ineighbor_alltoallw",
                // Sessions (session.rs).
                SessionInit "Session_init",
                SessionFinalize "Session_finalize",
                SessionGetInfo "Session_get_info",
                SessionGetNumPsets "Session_get_num_psets",
                SessionGetNthPset "Session_get_nth_pset",
                SessionGetPsetInfo "Session_get_pset_info",
                GroupFromSessionPset "Group_from_session_pset",
                CommCreateFromGroup "Comm_create_from_group",
                // Large-count calls (large_count.rs): they run the int call, measured as it.
                SendC "Send_c",
                RecvC "Recv_c",
                IsendC "Isend_c",
                IrecvC "Irecv_c",
                BcastC "Bcast_c",
                ReduceC "Reduce_c",
                AllreduceC "Allreduce_c",
                AlltoallvC "Alltoallv_c",
                GetCountC "Get_count_c",
                TypeSizeC "Type_size_c",
                TypeGetExtentC "Type_get_extent_c",
                TypeGetTrueExtentC "Type_get_true_extent_c",
                TypeContiguousC "Type_contiguous_c",
                TypeCreateHindexedC "Type_create_hindexed_c",
                TypeCreateIndexedBlockC "Type_create_indexed_block_c",
            }
        }
    };
}

macro_rules! define_calls {
    (
        measured { $($m:ident = $slot:literal $mname:literal,)* }
        measured_without_c_abi { $($r:ident = $rslot:literal $rname:literal,)* }
        local { $($l:ident $lname:literal,)* }
    ) => {
        /// A measured MPI call, as the MMDS counts it. Values are slots in
        /// [`crate::mmds::MmdsBlock`] and are stored in recordings: append new primitives
        /// (below [`crate::mmds::PRIMITIVE_SLOTS`]) in
        /// [`for_each_mpi_call!`](crate::for_each_mpi_call), never renumber.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u16)]
        pub enum Primitive { $($m = $slot,)* $($r = $rslot,)* }

        impl Primitive {
            /// Every primitive, in table order.
            pub const ALL: &'static [Primitive] = &[$(Primitive::$m,)* $(Primitive::$r,)*];

            /// The MPI function name (`MPI_Send`, ...).
            pub const fn mpi_name(self) -> &'static str {
                match self {
                    $(Primitive::$m => concat!("MPI_", $mname),)*
                    $(Primitive::$r => concat!("MPI_", $rname),)*
                }
            }

            /// The primitive measured in MMDS slot `slot`.
            pub const fn from_slot(slot: usize) -> Option<Primitive> {
                match slot {
                    $($slot => Some(Primitive::$m),)*
                    $($rslot => Some(Primitive::$r),)*
                    _ => None,
                }
            }

            /// The C entry point of this primitive, if it has one.
            pub const fn c_call(self) -> Option<Call> {
                match self {
                    $(Primitive::$m => Some(Call::$m),)*
                    $(Primitive::$r => None,)*
                }
            }
        }

        /// A C entry point of `strobe-mpi` (`PMPI_name`, with the weak alias `MPI_name`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Call { $($m,)* $($l,)* }

        impl Call {
            /// Every C entry point, in table order.
            pub const ALL: &'static [Call] = &[$(Call::$m,)* $(Call::$l,)*];

            /// The MPI function name (`MPI_Send`, ...).
            pub const fn mpi_name(self) -> &'static str {
                match self {
                    $(Call::$m => concat!("MPI_", $mname),)*
                    $(Call::$l => concat!("MPI_", $lname),)*
                }
            }

            /// The name without its `MPI_` prefix (`Send`), as in `mpi.h`'s
            /// `STROBE_MPI_FN(ret, name, args)`.
            pub const fn c_name(self) -> &'static str {
                match self {
                    $(Call::$m => $mname,)*
                    $(Call::$l => $lname,)*
                }
            }

            /// The primitive the MMDS counts this call as (`None` for local calls such as
            /// `MPI_Comm_rank`, whose time stays computation).
            #[inline]
            pub const fn primitive(self) -> Option<Primitive> {
                match self {
                    $(Call::$m => Some(Primitive::$m),)*
                    $(Call::$l => None,)*
                }
            }
        }
    };
}

crate::for_each_mpi_call!(define_calls);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mmds::PRIMITIVE_SLOTS;
    use std::collections::BTreeSet;

    fn camel(c_name: &str) -> String {
        c_name
            .split('_')
            .map(|p| {
                let mut cs = p.chars();
                cs.next()
                    .map(|f| f.to_ascii_uppercase().to_string() + cs.as_str())
                    .unwrap_or_default()
            })
            .collect()
    }

    #[test]
    fn primitive_names_are_unique_and_slots_fit() {
        let names: BTreeSet<_> = Primitive::ALL.iter().map(|p| p.mpi_name()).collect();
        assert_eq!(names.len(), Primitive::ALL.len());
        for p in Primitive::ALL {
            assert!((*p as usize) < PRIMITIVE_SLOTS);
            assert_eq!(Primitive::from_slot(*p as usize), Some(*p));
        }
    }

    /// Recordings store slots: these must never change (append new primitives only).
    #[test]
    fn primitive_slots_are_the_recorded_ones() {
        let fixed = [
            (Primitive::Init, 0),
            (Primitive::Send, 4),
            (Primitive::Wait, 17),
            (Primitive::Barrier, 25),
            (Primitive::Alltoallv, 40),
            (Primitive::RequestFree, 44),
            (Primitive::Ibsend, 46),
            (Primitive::InitThread, 51),
        ];
        for (p, slot) in fixed {
            assert_eq!(p as usize, slot, "{}", p.mpi_name());
        }
        let mut slots: Vec<usize> = Primitive::ALL.iter().map(|p| *p as usize).collect();
        slots.sort_unstable();
        assert_eq!(
            slots,
            (0..Primitive::ALL.len()).collect::<Vec<_>>(),
            "dense, unique"
        );
    }

    #[test]
    fn calls_are_unique_named_by_their_identifier_and_map_to_their_primitive() {
        let names: BTreeSet<_> = Call::ALL.iter().map(|c| c.mpi_name()).collect();
        assert_eq!(names.len(), Call::ALL.len());
        for c in Call::ALL {
            assert_eq!(c.mpi_name(), format!("MPI_{}", c.c_name()));
            assert_eq!(
                format!("{c:?}"),
                camel(c.c_name()),
                "identifier of {}",
                c.mpi_name()
            );
            if let Some(p) = c.primitive() {
                assert_eq!(p.mpi_name(), c.mpi_name());
                assert_eq!(p.c_call(), Some(*c));
            }
        }
        for p in Primitive::ALL {
            if let Some(c) = p.c_call() {
                assert_eq!(c.primitive(), Some(*p));
            }
        }
        assert_eq!(Call::CommRank.primitive(), None);
        assert_eq!(Call::Send.primitive(), Some(Primitive::Send));
        assert_eq!(Primitive::Ibsend.c_call(), Some(Call::Ibsend));
    }
}
