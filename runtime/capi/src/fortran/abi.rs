//! The weak `mpi_x_` aliases of the Fortran `pmpi_x_` implementations (the `MPI_X_f2c`
//! family is in the call table, so the C layer's `abi.rs` makes their `MPI_` aliases):
//! the same scheme as the C layer's `MPI_X` (see `src/abi.rs` there), kept as its
//! own copy so the Fortran binding does not depend on that file's internals. A profiling
//! library defining `mpi_send_` (strong) wins and can call `pmpi_send_`.

/// `weak_aliases!(ALIAS_PREFIX, TARGET_PREFIX, SUFFIX: NAME...)` defines, for each NAME,
/// the weak function ALIAS_PREFIX NAME SUFFIX as a tail jump to TARGET_PREFIX NAME SUFFIX.
macro_rules! weak_aliases {
    ($ap:literal, $tp:literal, $sfx:literal: $($name:literal)*) => {
        $(
            #[cfg(target_arch = "x86_64")]
            core::arch::global_asm!(concat!(
                ".pushsection .text.", $ap, $name, $sfx, ",\"ax\",@progbits\n",
                ".weak ", $ap, $name, $sfx, "\n",
                ".type ", $ap, $name, $sfx, ",@function\n",
                ".p2align 4\n",
                $ap, $name, $sfx, ":\n",
                "    jmp ", $tp, $name, $sfx, "@PLT\n",
                ".size ", $ap, $name, $sfx, ", .-", $ap, $name, $sfx, "\n",
                ".popsection\n",
            ));
            #[cfg(target_arch = "aarch64")]
            core::arch::global_asm!(concat!(
                ".pushsection .text.", $ap, $name, $sfx, ",\"ax\",@progbits\n",
                ".weak ", $ap, $name, $sfx, "\n",
                ".type ", $ap, $name, $sfx, ",%function\n",
                ".p2align 2\n",
                $ap, $name, $sfx, ":\n",
                "    b ", $tp, $name, $sfx, "\n",
                ".size ", $ap, $name, $sfx, ", .-", $ap, $name, $sfx, "\n",
                ".popsection\n",
            ));
        )*
    };
}

// Every pmpi_x_ of this directory (tests/tests/fortran.rs checks both names are exported
// for every function of mpi.h).
weak_aliases! { "mpi_", "pmpi_", "_":
    "abort" "allgather" "allgatherv" "alloc_mem" "allreduce" "alltoall" "alltoallv"
    "attr_get" "barrier" "bcast" "bsend" "buffer_attach" "buffer_detach" "cancel"
    "comm_compare" "comm_create" "comm_create_group" "comm_create_keyval"
    "comm_delete_attr" "comm_dup" "comm_free" "comm_free_keyval" "comm_get_attr"
    "comm_get_errhandler" "comm_get_name" "comm_get_parent" "comm_group" "comm_rank"
    "comm_remote_size" "comm_set_attr" "comm_set_errhandler" "comm_set_name" "comm_size"
    "comm_split" "comm_split_type" "comm_test_inter" "dims_create" "errhandler_free"
    "error_class" "error_string" "exscan" "finalize" "finalized" "free_mem" "gather"
    "gatherv" "get_address" "get_count" "get_library_version" "get_processor_name"
    "get_version" "group_compare" "group_excl" "group_free" "group_incl" "group_range_incl"
    "group_rank" "group_size" "group_translate_ranks" "init" "init_thread" "initialized"
    "iprobe" "irecv" "irsend" "is_thread_main" "isend" "issend" "op_commutative"
    "op_create" "op_free" "pack" "pack_size" "probe" "query_thread" "recv" "reduce"
    "reduce_local" "reduce_scatter" "reduce_scatter_block" "request_free" "rsend" "scan"
    "scatter" "scatterv" "send" "sendrecv" "sendrecv_replace" "ssend" "test"
    "test_cancelled" "testall" "testany" "testsome" "type_commit" "type_contiguous"
    "type_create_hindexed" "type_create_hvector" "type_create_indexed_block"
    "type_create_resized" "type_create_struct" "type_dup" "type_free" "type_get_envelope"
    "type_get_extent" "type_get_true_extent" "type_indexed" "type_size" "type_vector"
    "unpack" "wait" "waitall" "waitany" "waitsome" "wtick" "wtime"
    // Nonblocking collectives, Alltoallw and intercommunicators (fortran/icoll.rs).
    "alltoallw" "ialltoallw" "ibarrier" "ibcast" "ireduce" "iallreduce" "iscan" "iexscan"
    "ireduce_scatter" "ireduce_scatter_block" "igather" "igatherv" "iscatter" "iscatterv"
    "iallgather" "iallgatherv" "ialltoall" "ialltoallv" "intercomm_create"
    "intercomm_merge" "comm_remote_group"
}

// mpireq (issue 13): persistent, generalized and matched-probe requests, Info, attributes,
// error handlers, datatypes (fortran/mpireq.rs).
weak_aliases! { "mpi_", "pmpi_", "_":
    "send_init" "ssend_init" "rsend_init" "bsend_init" "recv_init" "start" "startall"
    "request_get_status" "ibsend" "isendrecv" "isendrecv_replace" "mprobe" "improbe" "mrecv"
    "imrecv" "grequest_start" "grequest_complete" "status_set_elements"
    "status_set_elements_x" "status_set_cancelled" "info_create" "info_set" "info_delete"
    "info_get" "info_get_string" "info_get_valuelen" "info_get_nkeys" "info_get_nthkey"
    "info_dup" "info_free" "comm_set_info" "comm_get_info" "comm_dup_with_info"
    "keyval_create" "keyval_free" "attr_put" "attr_delete" "type_create_keyval"
    "type_free_keyval" "type_set_attr" "type_get_attr" "type_delete_attr" "get_elements"
    "get_elements_x" "type_size_x" "type_get_extent_x" "type_get_true_extent_x"
    "type_extent" "type_lb" "type_ub" "type_hvector" "type_hindexed" "type_struct"
    "type_create_hindexed_block" "type_create_subarray" "type_set_name" "type_get_name"
    "comm_create_errhandler" "errhandler_create" "errhandler_set" "errhandler_get"
    "comm_call_errhandler" "add_error_class" "add_error_code" "add_error_string"
    "group_union" "group_intersection" "group_difference" "group_range_excl"
}

// mpi13b (issue 13): datatype contents, external32, darray (fortran/dtypes.rs), and the
// callback-taking functions (fortran/callbacks.rs, fortran/keyval.rs) listed above.
weak_aliases! { "mpi_", "pmpi_", "_":
    "type_get_contents" "type_match_size" "pack_external" "pack_external_size"
    "unpack_external" "type_create_darray" "type_create_f90_integer" "type_create_f90_real"
    "type_create_f90_complex"
}

// Issue 13 (mpi13a): persistent collectives, Comm_idup, topologies, neighbour collectives,
// sessions (fortran/mpi4.rs).
weak_aliases! { "mpi_", "pmpi_", "_":
    "barrier_init" "bcast_init" "reduce_init" "allreduce_init" "scan_init" "exscan_init" "reduce_scatter_init" "reduce_scatter_block_init" "gather_init" "gatherv_init" "scatter_init" "scatterv_init" "allgather_init" "allgatherv_init" "alltoall_init" "alltoallv_init" "alltoallw_init" "comm_idup" "comm_idup_with_info" "cart_create" "cart_coords" "cart_rank" "cart_shift" "cart_sub" "cart_get" "cart_map" "cartdim_get" "graph_create" "graph_get" "graph_neighbors" "graph_neighbors_count" "graph_map" "graphdims_get" "dist_graph_create" "dist_graph_create_adjacent" "dist_graph_neighbors" "dist_graph_neighbors_count" "topo_test" "neighbor_allgather" "neighbor_allgatherv" "neighbor_alltoall" "neighbor_alltoallv" "neighbor_alltoallw" "ineighbor_allgather" "ineighbor_allgatherv" "ineighbor_alltoall" "ineighbor_alltoallv" "ineighbor_alltoallw" "session_init" "session_finalize" "session_get_info" "session_get_num_psets" "session_get_nth_pset" "session_get_pset_info" "group_from_session_pset" "comm_create_from_group"
}
