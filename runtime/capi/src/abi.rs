//! The weak `MPI_*` aliases of the `PMPI_*` implementations.
//!
//! MPICH makes `MPI_Send` a weak alias of `PMPI_Send` with `#pragma weak`; GCC only allows
//! that in the translation unit that defines `PMPI_Send`, which here is Rust. So each
//! `MPI_name` is a weak symbol defined in `global_asm!`: a single tail jump to
//! `PMPI_name`, which leaves every argument register and the return value untouched. A
//! profiling library that defines `MPI_name` (strong) wins over it in a static link, and
//! in a shared link by ordinary symbol interposition. `build.rs` exports the aliases from
//! the shared library. The integration tests check that every function declared in
//! `mpi.h` is exported under both names.

macro_rules! weak_aliases {
    ($($name:literal)*) => {
        $(
            #[cfg(target_arch = "x86_64")]
            core::arch::global_asm!(concat!(
                ".pushsection .text.MPI_", $name, ",\"ax\",@progbits\n",
                ".weak MPI_", $name, "\n",
                ".type MPI_", $name, ",@function\n",
                ".p2align 4\n",
                "MPI_", $name, ":\n",
                "    jmp PMPI_", $name, "@PLT\n",
                ".size MPI_", $name, ", .-MPI_", $name, "\n",
                ".popsection\n",
            ));
            #[cfg(target_arch = "aarch64")]
            core::arch::global_asm!(concat!(
                ".pushsection .text.MPI_", $name, ",\"ax\",@progbits\n",
                ".weak MPI_", $name, "\n",
                ".type MPI_", $name, ",%function\n",
                ".p2align 2\n",
                "MPI_", $name, ":\n",
                "    b PMPI_", $name, "\n",
                ".size MPI_", $name, ", .-MPI_", $name, "\n",
                ".popsection\n",
            ));
        )*
    };
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("strobe-mpi: the MPI_* weak aliases are written for x86_64 and aarch64 only");

// Keep in step with the declarations in include/mpi.h.
weak_aliases! {
    "Init" "Init_thread" "Query_thread" "Is_thread_main" "Initialized" "Finalize" "Finalized"
    "Abort" "Get_processor_name" "Get_version" "Get_library_version" "Wtime" "Wtick"
    "Alloc_mem" "Free_mem" "Error_string" "Error_class" "Comm_set_errhandler"
    "Comm_get_errhandler" "Errhandler_free"
    "Send" "Ssend" "Rsend" "Bsend" "Buffer_attach" "Buffer_detach" "Recv" "Isend" "Issend"
    "Irsend" "Irecv" "Sendrecv" "Sendrecv_replace" "Probe" "Iprobe" "Get_count"
    "Test_cancelled" "Wait" "Test" "Waitall" "Testall" "Waitany" "Testany" "Waitsome"
    "Testsome" "Request_free" "Cancel"
    "Barrier" "Bcast" "Reduce" "Allreduce" "Reduce_scatter" "Reduce_scatter_block" "Scan"
    "Exscan" "Reduce_local" "Scatter" "Scatterv" "Gather" "Gatherv" "Allgather" "Allgatherv"
    "Alltoall" "Alltoallv" "Op_create" "Op_free" "Op_commutative"
    "Type_contiguous" "Type_vector" "Type_create_hvector" "Type_indexed"
    "Type_create_hindexed" "Type_create_indexed_block" "Type_create_struct"
    "Type_create_resized" "Type_dup" "Type_commit" "Type_free" "Type_size" "Type_get_extent"
    "Type_get_true_extent" "Type_get_envelope" "Get_address" "Pack" "Unpack" "Pack_size"
    "Comm_rank" "Comm_size" "Comm_dup" "Comm_split" "Comm_split_type" "Comm_get_parent"
    "Dims_create" "Comm_create" "Comm_create_group"
    "Comm_free" "Comm_compare" "Comm_group" "Comm_test_inter" "Comm_remote_size"
    "Comm_set_name" "Comm_get_name" "Comm_create_keyval" "Comm_free_keyval" "Comm_set_attr"
    "Comm_get_attr" "Comm_delete_attr" "Attr_get"
    "Group_size" "Group_rank" "Group_incl" "Group_excl" "Group_range_incl"
    "Group_translate_ranks" "Group_compare" "Group_free"
}
