/*
 * mpi.h: the C interface of strobe (MPI-3.1 names, constants and handle types).
 *
 * Handles are plain ints, as in MPICH. Every function exists twice: PMPI_x is the
 * implementation and MPI_x a weak alias of it, so a profiling library that defines MPI_x
 * and calls PMPI_x wraps strobe in both shared and static links.
 *
 * What is supported, and what is not yet: docs/mpi-support.md.
 * The numeric values below are mirrored in runtime/capi/src/consts.rs; keep them in step.
 */
#ifndef STROBE_MPI_H
#define STROBE_MPI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MPI_VERSION 3
#define MPI_SUBVERSION 1
#define STROBE_MPI 1

/* ---- handles ---- */
typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Op;
typedef int MPI_Request;
typedef int MPI_Group;
typedef int MPI_Errhandler;
typedef int MPI_Info;
typedef intptr_t MPI_Aint;
typedef long long MPI_Offset;
typedef long long MPI_Count;
typedef int MPI_Fint;

typedef struct MPI_Status {
    int MPI_SOURCE;
    int MPI_TAG;
    int MPI_ERROR;
    int strobe_cancelled;      /* private: use MPI_Test_cancelled */
    long long strobe_bytes;    /* private: use MPI_Get_count */
} MPI_Status;

#define MPI_COMM_NULL  ((MPI_Comm)0)
#define MPI_COMM_WORLD ((MPI_Comm)1)
#define MPI_COMM_SELF  ((MPI_Comm)2)

#define MPI_GROUP_NULL  ((MPI_Group)0)
#define MPI_GROUP_EMPTY ((MPI_Group)1)

#define MPI_REQUEST_NULL ((MPI_Request)0)
#define MPI_INFO_NULL ((MPI_Info)0)

#define MPI_ERRHANDLER_NULL  ((MPI_Errhandler)0)
#define MPI_ERRORS_ARE_FATAL ((MPI_Errhandler)1)
#define MPI_ERRORS_RETURN    ((MPI_Errhandler)2)

/* ---- datatypes ---- */
#define MPI_DATATYPE_NULL      ((MPI_Datatype)0)
#define MPI_CHAR               ((MPI_Datatype)1)
#define MPI_SIGNED_CHAR        ((MPI_Datatype)2)
#define MPI_UNSIGNED_CHAR      ((MPI_Datatype)3)
#define MPI_BYTE               ((MPI_Datatype)4)
#define MPI_WCHAR              ((MPI_Datatype)5)
#define MPI_SHORT              ((MPI_Datatype)6)
#define MPI_UNSIGNED_SHORT     ((MPI_Datatype)7)
#define MPI_INT                ((MPI_Datatype)8)
#define MPI_UNSIGNED           ((MPI_Datatype)9)
#define MPI_LONG               ((MPI_Datatype)10)
#define MPI_UNSIGNED_LONG      ((MPI_Datatype)11)
#define MPI_LONG_LONG_INT      ((MPI_Datatype)12)
#define MPI_LONG_LONG          MPI_LONG_LONG_INT
#define MPI_UNSIGNED_LONG_LONG ((MPI_Datatype)13)
#define MPI_FLOAT              ((MPI_Datatype)14)
#define MPI_DOUBLE             ((MPI_Datatype)15)
#define MPI_LONG_DOUBLE        ((MPI_Datatype)16)
#define MPI_INT8_T             ((MPI_Datatype)17)
#define MPI_INT16_T            ((MPI_Datatype)18)
#define MPI_INT32_T            ((MPI_Datatype)19)
#define MPI_INT64_T            ((MPI_Datatype)20)
#define MPI_UINT8_T            ((MPI_Datatype)21)
#define MPI_UINT16_T           ((MPI_Datatype)22)
#define MPI_UINT32_T           ((MPI_Datatype)23)
#define MPI_UINT64_T           ((MPI_Datatype)24)
#define MPI_C_BOOL             ((MPI_Datatype)25)
#define MPI_AINT               ((MPI_Datatype)26)
#define MPI_OFFSET             ((MPI_Datatype)27)
#define MPI_COUNT              ((MPI_Datatype)28)
#define MPI_PACKED             ((MPI_Datatype)29)
#define MPI_FLOAT_INT          ((MPI_Datatype)30)
#define MPI_DOUBLE_INT         ((MPI_Datatype)31)
#define MPI_LONG_INT           ((MPI_Datatype)32)
#define MPI_2INT               ((MPI_Datatype)33)
#define MPI_SHORT_INT          ((MPI_Datatype)34)
#define MPI_LONG_DOUBLE_INT    ((MPI_Datatype)35)
/* complex types (SUM and PROD reduce them; MPI_C_COMPLEX is MPI_C_FLOAT_COMPLEX) */
#define MPI_C_FLOAT_COMPLEX       ((MPI_Datatype)36)
#define MPI_C_COMPLEX             MPI_C_FLOAT_COMPLEX
#define MPI_C_DOUBLE_COMPLEX      ((MPI_Datatype)37)
#define MPI_C_LONG_DOUBLE_COMPLEX ((MPI_Datatype)38)
#define MPI_COMPLEX               ((MPI_Datatype)-102) /* Fortran's handles (mpif.h) */
#define MPI_DOUBLE_COMPLEX        ((MPI_Datatype)-103)

/* type constructors (MPI_Type_get_envelope) */
#define MPI_COMBINER_NAMED          1
#define MPI_COMBINER_DUP            2
#define MPI_COMBINER_CONTIGUOUS     3
#define MPI_COMBINER_VECTOR         4
#define MPI_COMBINER_HVECTOR        5
#define MPI_COMBINER_INDEXED        6
#define MPI_COMBINER_HINDEXED       7
#define MPI_COMBINER_INDEXED_BLOCK  8
#define MPI_COMBINER_HINDEXED_BLOCK 9
#define MPI_COMBINER_STRUCT         10
#define MPI_COMBINER_SUBARRAY       11
#define MPI_COMBINER_DARRAY         12
#define MPI_COMBINER_F90_REAL       13
#define MPI_COMBINER_F90_COMPLEX    14
#define MPI_COMBINER_F90_INTEGER    15
#define MPI_COMBINER_RESIZED        16

/* ---- reduction operations ---- */
#define MPI_OP_NULL ((MPI_Op)0)
#define MPI_MAX     ((MPI_Op)1)
#define MPI_MIN     ((MPI_Op)2)
#define MPI_SUM     ((MPI_Op)3)
#define MPI_PROD    ((MPI_Op)4)
#define MPI_LAND    ((MPI_Op)5)
#define MPI_BAND    ((MPI_Op)6)
#define MPI_LOR     ((MPI_Op)7)
#define MPI_BOR     ((MPI_Op)8)
#define MPI_LXOR    ((MPI_Op)9)
#define MPI_BXOR    ((MPI_Op)10)
#define MPI_MINLOC  ((MPI_Op)11)
#define MPI_MAXLOC  ((MPI_Op)12)
#define MPI_REPLACE ((MPI_Op)13)
#define MPI_NO_OP   ((MPI_Op)14)

typedef void (MPI_User_function)(void *invec, void *inoutvec, int *len, MPI_Datatype *datatype);

/* ---- special values ---- */
#define MPI_ANY_SOURCE (-1)
#define MPI_ANY_TAG    (-1)
#define MPI_PROC_NULL  (-2)
#define MPI_ROOT       (-3)
#define MPI_UNDEFINED  (-32766)
#define MPI_KEYVAL_INVALID 0

#define MPI_BOTTOM           ((void *)0)
#define MPI_IN_PLACE         ((void *)-1)
#define MPI_STATUS_IGNORE    ((MPI_Status *)1)
#define MPI_STATUSES_IGNORE  ((MPI_Status *)1)
#define MPI_ERRCODES_IGNORE  ((int *)0)

#define MPI_MAX_PROCESSOR_NAME        256
#define MPI_MAX_ERROR_STRING          512
#define MPI_MAX_OBJECT_NAME           128
#define MPI_MAX_LIBRARY_VERSION_STRING 8192
#define MPI_BSEND_OVERHEAD            128

/* thread levels */
#define MPI_THREAD_SINGLE     0
#define MPI_THREAD_FUNNELED   1
#define MPI_THREAD_SERIALIZED 2
#define MPI_THREAD_MULTIPLE   3

/* MPI_Comm_split_type */
#define MPI_COMM_TYPE_SHARED 1

/* communicator and group comparison */
#define MPI_IDENT     0
#define MPI_CONGRUENT 1
#define MPI_SIMILAR   2
#define MPI_UNEQUAL   3

/* predefined attribute keys (MPI_Comm_get_attr on MPI_COMM_WORLD) */
#define MPI_TAG_UB          1
#define MPI_HOST            2
#define MPI_IO              3
#define MPI_WTIME_IS_GLOBAL 4
#define MPI_UNIVERSE_SIZE   5
#define MPI_APPNUM          6
#define MPI_LASTUSEDCODE    7

typedef int (MPI_Comm_copy_attr_function)(MPI_Comm oldcomm, int comm_keyval, void *extra_state,
                                          void *attribute_val_in, void *attribute_val_out,
                                          int *flag);
typedef int (MPI_Comm_delete_attr_function)(MPI_Comm comm, int comm_keyval,
                                            void *attribute_val, void *extra_state);
/* MPI_COMM_NULL_COPY_FN: the attribute is not copied by MPI_Comm_dup. MPI_COMM_DUP_FN: it
 * is, as is. MPI_COMM_NULL_DELETE_FN: nothing happens on delete. */
#define MPI_COMM_NULL_COPY_FN   ((MPI_Comm_copy_attr_function *)0)
#define MPI_COMM_DUP_FN         ((MPI_Comm_copy_attr_function *)1)
#define MPI_COMM_NULL_DELETE_FN ((MPI_Comm_delete_attr_function *)0)

/* ---- error classes (each error code is its class) ---- */
#define MPI_SUCCESS          0
#define MPI_ERR_BUFFER       1
#define MPI_ERR_COUNT        2
#define MPI_ERR_TYPE         3
#define MPI_ERR_TAG          4
#define MPI_ERR_COMM         5
#define MPI_ERR_RANK         6
#define MPI_ERR_REQUEST      7
#define MPI_ERR_ROOT         8
#define MPI_ERR_GROUP        9
#define MPI_ERR_OP           10
#define MPI_ERR_TOPOLOGY     11
#define MPI_ERR_DIMS         12
#define MPI_ERR_ARG          13
#define MPI_ERR_UNKNOWN      14
#define MPI_ERR_TRUNCATE     15
#define MPI_ERR_OTHER        16
#define MPI_ERR_INTERN       17
#define MPI_ERR_IN_STATUS    18
#define MPI_ERR_PENDING      19
#define MPI_ERR_KEYVAL       20
#define MPI_ERR_NO_MEM       21
#define MPI_ERR_BASE         22
#define MPI_ERR_INFO_KEY     23
#define MPI_ERR_INFO_VALUE   24
#define MPI_ERR_INFO_NOKEY   25
#define MPI_ERR_SPAWN        26
#define MPI_ERR_PORT         27
#define MPI_ERR_SERVICE      28
#define MPI_ERR_NAME         29
#define MPI_ERR_WIN          30
#define MPI_ERR_SIZE         31
#define MPI_ERR_DISP         32
#define MPI_ERR_INFO         33
#define MPI_ERR_LOCKTYPE     34
#define MPI_ERR_ASSERT       35
#define MPI_ERR_RMA_CONFLICT 36
#define MPI_ERR_RMA_SYNC     37
#define MPI_ERR_FILE         38
#define MPI_ERR_NOT_SAME     39
#define MPI_ERR_AMODE        40
#define MPI_ERR_UNSUPPORTED_DATAREP   41
#define MPI_ERR_UNSUPPORTED_OPERATION 42
#define MPI_ERR_NO_SUCH_FILE 43
#define MPI_ERR_FILE_EXISTS  44
#define MPI_ERR_BAD_FILE     45
#define MPI_ERR_ACCESS       46
#define MPI_ERR_NO_SPACE     47
#define MPI_ERR_QUOTA        48
#define MPI_ERR_READ_ONLY    49
#define MPI_ERR_FILE_IN_USE  50
#define MPI_ERR_DUP_DATAREP  51
#define MPI_ERR_CONVERSION   52
#define MPI_ERR_IO           53
#define MPI_ERR_RMA_RANGE    54
#define MPI_ERR_RMA_ATTACH   55
#define MPI_ERR_RMA_SHARED   56
#define MPI_ERR_RMA_FLAVOR   57
#define MPI_ERR_LASTCODE     57

/* Every function is declared twice: MPI_name (weak alias) and PMPI_name (implementation). */
#define STROBE_MPI_FN(ret, name, args) ret MPI_##name args; ret PMPI_##name args;

/* environment */
STROBE_MPI_FN(int, Init, (int *argc, char ***argv))
STROBE_MPI_FN(int, Init_thread, (int *argc, char ***argv, int required, int *provided))
STROBE_MPI_FN(int, Query_thread, (int *provided))
STROBE_MPI_FN(int, Is_thread_main, (int *flag))
STROBE_MPI_FN(int, Initialized, (int *flag))
STROBE_MPI_FN(int, Finalize, (void))
STROBE_MPI_FN(int, Finalized, (int *flag))
STROBE_MPI_FN(int, Abort, (MPI_Comm comm, int errorcode))
STROBE_MPI_FN(int, Get_processor_name, (char *name, int *resultlen))
STROBE_MPI_FN(int, Get_version, (int *version, int *subversion))
STROBE_MPI_FN(int, Get_library_version, (char *version, int *resultlen))
STROBE_MPI_FN(double, Wtime, (void))
STROBE_MPI_FN(double, Wtick, (void))
STROBE_MPI_FN(int, Alloc_mem, (MPI_Aint size, MPI_Info info, void *baseptr))
STROBE_MPI_FN(int, Free_mem, (void *base))
STROBE_MPI_FN(int, Error_string, (int errorcode, char *string, int *resultlen))
STROBE_MPI_FN(int, Error_class, (int errorcode, int *errorclass))
STROBE_MPI_FN(int, Comm_set_errhandler, (MPI_Comm comm, MPI_Errhandler errhandler))
STROBE_MPI_FN(int, Comm_get_errhandler, (MPI_Comm comm, MPI_Errhandler *errhandler))
STROBE_MPI_FN(int, Errhandler_free, (MPI_Errhandler *errhandler))

/* point to point */
STROBE_MPI_FN(int, Send, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm))
STROBE_MPI_FN(int, Ssend, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm))
STROBE_MPI_FN(int, Rsend, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm))
STROBE_MPI_FN(int, Bsend, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm))
STROBE_MPI_FN(int, Buffer_attach, (void *buffer, int size))
STROBE_MPI_FN(int, Buffer_detach, (void *buffer_addr, int *size))
STROBE_MPI_FN(int, Recv, (void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status *status))
STROBE_MPI_FN(int, Isend, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Issend, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Irsend, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Irecv, (void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Sendrecv, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                              void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                              MPI_Comm comm, MPI_Status *status))
STROBE_MPI_FN(int, Sendrecv_replace, (void *buf, int count, MPI_Datatype datatype, int dest, int sendtag,
                                      int source, int recvtag, MPI_Comm comm, MPI_Status *status))
STROBE_MPI_FN(int, Probe, (int source, int tag, MPI_Comm comm, MPI_Status *status))
STROBE_MPI_FN(int, Iprobe, (int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status))
STROBE_MPI_FN(int, Get_count, (const MPI_Status *status, MPI_Datatype datatype, int *count))
STROBE_MPI_FN(int, Test_cancelled, (const MPI_Status *status, int *flag))
STROBE_MPI_FN(int, Wait, (MPI_Request *request, MPI_Status *status))
STROBE_MPI_FN(int, Test, (MPI_Request *request, int *flag, MPI_Status *status))
STROBE_MPI_FN(int, Waitall, (int count, MPI_Request *array_of_requests, MPI_Status *array_of_statuses))
STROBE_MPI_FN(int, Testall, (int count, MPI_Request *array_of_requests, int *flag, MPI_Status *array_of_statuses))
STROBE_MPI_FN(int, Waitany, (int count, MPI_Request *array_of_requests, int *index, MPI_Status *status))
STROBE_MPI_FN(int, Testany, (int count, MPI_Request *array_of_requests, int *index, int *flag, MPI_Status *status))
STROBE_MPI_FN(int, Waitsome, (int incount, MPI_Request *array_of_requests, int *outcount, int *array_of_indices, MPI_Status *array_of_statuses))
STROBE_MPI_FN(int, Testsome, (int incount, MPI_Request *array_of_requests, int *outcount, int *array_of_indices, MPI_Status *array_of_statuses))
STROBE_MPI_FN(int, Request_free, (MPI_Request *request))
STROBE_MPI_FN(int, Cancel, (MPI_Request *request))

/* collectives */
STROBE_MPI_FN(int, Barrier, (MPI_Comm comm))
STROBE_MPI_FN(int, Bcast, (void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm))
STROBE_MPI_FN(int, Reduce, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm))
STROBE_MPI_FN(int, Allreduce, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm))
STROBE_MPI_FN(int, Reduce_scatter, (const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op, MPI_Comm comm))
STROBE_MPI_FN(int, Reduce_scatter_block, (const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm))
STROBE_MPI_FN(int, Scan, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm))
STROBE_MPI_FN(int, Exscan, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm))
STROBE_MPI_FN(int, Reduce_local, (const void *inbuf, void *inoutbuf, int count, MPI_Datatype datatype, MPI_Op op))
STROBE_MPI_FN(int, Scatter, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm))
STROBE_MPI_FN(int, Scatterv, (const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm))
STROBE_MPI_FN(int, Gather, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm))
STROBE_MPI_FN(int, Gatherv, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm))
STROBE_MPI_FN(int, Allgather, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm))
STROBE_MPI_FN(int, Allgatherv, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm))
STROBE_MPI_FN(int, Alltoall, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm))
STROBE_MPI_FN(int, Alltoallv, (const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm))
STROBE_MPI_FN(int, Alltoallw, (const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm))

/* nonblocking collectives (strobe-mpi's icoll.rs) */
STROBE_MPI_FN(int, Ibarrier, (MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Ibcast, (void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Ireduce, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Iallreduce, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Iscan, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Iexscan, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Ireduce_scatter, (const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Ireduce_scatter_block, (const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Igather, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Igatherv, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Iscatter, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Iscatterv, (const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Iallgather, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Iallgatherv, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Ialltoall, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Ialltoallv, (const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Ialltoallw, (const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Request *request))

/* intercommunicators (strobe-mpi's intercomm.rs) */
STROBE_MPI_FN(int, Intercomm_create, (MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm, int remote_leader, int tag, MPI_Comm *newintercomm))
STROBE_MPI_FN(int, Intercomm_merge, (MPI_Comm intercomm, int high, MPI_Comm *newintracomm))
STROBE_MPI_FN(int, Comm_remote_group, (MPI_Comm comm, MPI_Group *group))

STROBE_MPI_FN(int, Op_create, (MPI_User_function *user_fn, int commute, MPI_Op *op))
STROBE_MPI_FN(int, Op_free, (MPI_Op *op))
STROBE_MPI_FN(int, Op_commutative, (MPI_Op op, int *commute))

/* datatypes */
STROBE_MPI_FN(int, Type_contiguous, (int count, MPI_Datatype oldtype, MPI_Datatype *newtype))
STROBE_MPI_FN(int, Type_vector, (int count, int blocklength, int stride, MPI_Datatype oldtype, MPI_Datatype *newtype))
STROBE_MPI_FN(int, Type_create_hvector, (int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype, MPI_Datatype *newtype))
STROBE_MPI_FN(int, Type_indexed, (int count, const int array_of_blocklengths[], const int array_of_displacements[], MPI_Datatype oldtype, MPI_Datatype *newtype))
STROBE_MPI_FN(int, Type_create_hindexed, (int count, const int array_of_blocklengths[], const MPI_Aint array_of_displacements[], MPI_Datatype oldtype, MPI_Datatype *newtype))
STROBE_MPI_FN(int, Type_create_indexed_block, (int count, int blocklength, const int array_of_displacements[], MPI_Datatype oldtype, MPI_Datatype *newtype))
STROBE_MPI_FN(int, Type_create_struct, (int count, const int array_of_blocklengths[], const MPI_Aint array_of_displacements[], const MPI_Datatype array_of_types[], MPI_Datatype *newtype))
STROBE_MPI_FN(int, Type_create_resized, (MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent, MPI_Datatype *newtype))
STROBE_MPI_FN(int, Type_dup, (MPI_Datatype oldtype, MPI_Datatype *newtype))
STROBE_MPI_FN(int, Type_commit, (MPI_Datatype *datatype))
STROBE_MPI_FN(int, Type_free, (MPI_Datatype *datatype))
STROBE_MPI_FN(int, Type_size, (MPI_Datatype datatype, int *size))
STROBE_MPI_FN(int, Type_get_extent, (MPI_Datatype datatype, MPI_Aint *lb, MPI_Aint *extent))
STROBE_MPI_FN(int, Type_get_true_extent, (MPI_Datatype datatype, MPI_Aint *true_lb, MPI_Aint *true_extent))
STROBE_MPI_FN(int, Type_get_envelope, (MPI_Datatype datatype, int *num_integers, int *num_addresses, int *num_datatypes, int *combiner))
STROBE_MPI_FN(int, Get_address, (const void *location, MPI_Aint *address))
STROBE_MPI_FN(int, Pack, (const void *inbuf, int incount, MPI_Datatype datatype, void *outbuf, int outsize, int *position, MPI_Comm comm))
STROBE_MPI_FN(int, Unpack, (const void *inbuf, int insize, int *position, void *outbuf, int outcount, MPI_Datatype datatype, MPI_Comm comm))
STROBE_MPI_FN(int, Pack_size, (int incount, MPI_Datatype datatype, MPI_Comm comm, int *size))

/* communicators and groups */
STROBE_MPI_FN(int, Comm_rank, (MPI_Comm comm, int *rank))
STROBE_MPI_FN(int, Comm_size, (MPI_Comm comm, int *size))
STROBE_MPI_FN(int, Comm_dup, (MPI_Comm comm, MPI_Comm *newcomm))
STROBE_MPI_FN(int, Comm_split, (MPI_Comm comm, int color, int key, MPI_Comm *newcomm))
STROBE_MPI_FN(int, Comm_split_type, (MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm))
STROBE_MPI_FN(int, Comm_get_parent, (MPI_Comm *parent))
STROBE_MPI_FN(int, Dims_create, (int nnodes, int ndims, int dims[]))
STROBE_MPI_FN(int, Comm_create, (MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm))
STROBE_MPI_FN(int, Comm_create_group, (MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm))
STROBE_MPI_FN(int, Comm_free, (MPI_Comm *comm))
STROBE_MPI_FN(int, Comm_compare, (MPI_Comm comm1, MPI_Comm comm2, int *result))
STROBE_MPI_FN(int, Comm_group, (MPI_Comm comm, MPI_Group *group))
STROBE_MPI_FN(int, Comm_test_inter, (MPI_Comm comm, int *flag))
STROBE_MPI_FN(int, Comm_remote_size, (MPI_Comm comm, int *size))
STROBE_MPI_FN(int, Comm_set_name, (MPI_Comm comm, const char *comm_name))
STROBE_MPI_FN(int, Comm_get_name, (MPI_Comm comm, char *comm_name, int *resultlen))
STROBE_MPI_FN(int, Comm_create_keyval, (MPI_Comm_copy_attr_function *comm_copy_attr_fn, MPI_Comm_delete_attr_function *comm_delete_attr_fn, int *comm_keyval, void *extra_state))
STROBE_MPI_FN(int, Comm_free_keyval, (int *comm_keyval))
STROBE_MPI_FN(int, Comm_set_attr, (MPI_Comm comm, int comm_keyval, void *attribute_val))
STROBE_MPI_FN(int, Comm_get_attr, (MPI_Comm comm, int comm_keyval, void *attribute_val, int *flag))
STROBE_MPI_FN(int, Comm_delete_attr, (MPI_Comm comm, int comm_keyval))
STROBE_MPI_FN(int, Attr_get, (MPI_Comm comm, int keyval, void *attribute_val, int *flag))
STROBE_MPI_FN(int, Group_size, (MPI_Group group, int *size))
STROBE_MPI_FN(int, Group_rank, (MPI_Group group, int *rank))
STROBE_MPI_FN(int, Group_incl, (MPI_Group group, int n, const int ranks[], MPI_Group *newgroup))
STROBE_MPI_FN(int, Group_excl, (MPI_Group group, int n, const int ranks[], MPI_Group *newgroup))
STROBE_MPI_FN(int, Group_range_incl, (MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup))
STROBE_MPI_FN(int, Group_translate_ranks, (MPI_Group group1, int n, const int ranks1[], MPI_Group group2, int ranks2[]))
STROBE_MPI_FN(int, Group_compare, (MPI_Group group1, MPI_Group group2, int *result))
STROBE_MPI_FN(int, Group_free, (MPI_Group *group))


/* Handle and status conversion for mixed C/Fortran programs: a Fortran handle (MPI_Fint)
 * is the C handle, except for the Fortran-only datatypes (MPI_LOGICAL, MPI_COMPLEX, ...),
 * which MPI_Type_f2c maps onto C datatypes. Defined in src/fortran/handles.rs; the
 * Fortran status array (INTEGER status(MPI_STATUS_SIZE), MPI_STATUS_SIZE = 6) is
 * source, tag, error, cancelled and the byte count as two ints (low, high). */
STROBE_MPI_FN(MPI_Comm, Comm_f2c, (MPI_Fint handle))
STROBE_MPI_FN(MPI_Fint, Comm_c2f, (MPI_Comm handle))
STROBE_MPI_FN(MPI_Datatype, Type_f2c, (MPI_Fint handle))
STROBE_MPI_FN(MPI_Fint, Type_c2f, (MPI_Datatype handle))
STROBE_MPI_FN(MPI_Group, Group_f2c, (MPI_Fint handle))
STROBE_MPI_FN(MPI_Fint, Group_c2f, (MPI_Group handle))
STROBE_MPI_FN(MPI_Op, Op_f2c, (MPI_Fint handle))
STROBE_MPI_FN(MPI_Fint, Op_c2f, (MPI_Op handle))
STROBE_MPI_FN(MPI_Request, Request_f2c, (MPI_Fint handle))
STROBE_MPI_FN(MPI_Fint, Request_c2f, (MPI_Request handle))
STROBE_MPI_FN(MPI_Errhandler, Errhandler_f2c, (MPI_Fint handle))
STROBE_MPI_FN(MPI_Fint, Errhandler_c2f, (MPI_Errhandler handle))
STROBE_MPI_FN(MPI_Info, Info_f2c, (MPI_Fint handle))
STROBE_MPI_FN(MPI_Fint, Info_c2f, (MPI_Info handle))
STROBE_MPI_FN(int, Status_f2c, (const MPI_Fint *f_status, MPI_Status *c_status))
STROBE_MPI_FN(int, Status_c2f, (const MPI_Status *c_status, MPI_Fint *f_status))

/* ---- mpireq: persistent, generalized and matched-probe requests; Info objects ---- */
typedef int MPI_Message;
#define MPI_MESSAGE_NULL    ((MPI_Message)0)
#define MPI_MESSAGE_NO_PROC ((MPI_Message)1)
#define MPI_INFO_ENV ((MPI_Info)1)
#define MPI_MAX_INFO_KEY 255
#define MPI_MAX_INFO_VAL 1024
typedef int (MPI_Grequest_query_function)(void *extra_state, MPI_Status *status);
typedef int (MPI_Grequest_free_function)(void *extra_state);
typedef int (MPI_Grequest_cancel_function)(void *extra_state, int complete);
STROBE_MPI_FN(int, Send_init, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Ssend_init, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Rsend_init, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Bsend_init, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Recv_init, (void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Start, (MPI_Request *request))
STROBE_MPI_FN(int, Startall, (int count, MPI_Request array_of_requests[]))
STROBE_MPI_FN(int, Request_get_status, (MPI_Request request, int *flag, MPI_Status *status))
STROBE_MPI_FN(int, Ibsend, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Isendrecv, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                               void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                               MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Isendrecv_replace, (void *buf, int count, MPI_Datatype datatype, int dest, int sendtag,
                                       int source, int recvtag, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Mprobe, (int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status))
STROBE_MPI_FN(int, Improbe, (int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message, MPI_Status *status))
STROBE_MPI_FN(int, Mrecv, (void *buf, int count, MPI_Datatype datatype, MPI_Message *message, MPI_Status *status))
STROBE_MPI_FN(int, Imrecv, (void *buf, int count, MPI_Datatype datatype, MPI_Message *message, MPI_Request *request))
STROBE_MPI_FN(int, Grequest_start, (MPI_Grequest_query_function *query_fn, MPI_Grequest_free_function *free_fn,
                                    MPI_Grequest_cancel_function *cancel_fn, void *extra_state, MPI_Request *request))
STROBE_MPI_FN(int, Grequest_complete, (MPI_Request request))
STROBE_MPI_FN(int, Status_set_elements, (MPI_Status *status, MPI_Datatype datatype, int count))
STROBE_MPI_FN(int, Status_set_elements_x, (MPI_Status *status, MPI_Datatype datatype, MPI_Count count))
STROBE_MPI_FN(int, Status_set_cancelled, (MPI_Status *status, int flag))
STROBE_MPI_FN(int, Info_create, (MPI_Info *info))
STROBE_MPI_FN(int, Info_set, (MPI_Info info, const char *key, const char *value))
STROBE_MPI_FN(int, Info_delete, (MPI_Info info, const char *key))
STROBE_MPI_FN(int, Info_get, (MPI_Info info, const char *key, int valuelen, char *value, int *flag))
STROBE_MPI_FN(int, Info_get_string, (MPI_Info info, const char *key, int *buflen, char *value, int *flag))
STROBE_MPI_FN(int, Info_get_valuelen, (MPI_Info info, const char *key, int *valuelen, int *flag))
STROBE_MPI_FN(int, Info_get_nkeys, (MPI_Info info, int *nkeys))
STROBE_MPI_FN(int, Info_get_nthkey, (MPI_Info info, int n, char *key))
STROBE_MPI_FN(int, Info_dup, (MPI_Info info, MPI_Info *newinfo))
STROBE_MPI_FN(int, Info_free, (MPI_Info *info))
STROBE_MPI_FN(int, Comm_set_info, (MPI_Comm comm, MPI_Info info))
STROBE_MPI_FN(int, Comm_get_info, (MPI_Comm comm, MPI_Info *info_used))
STROBE_MPI_FN(int, Comm_dup_with_info, (MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm))
STROBE_MPI_FN(MPI_Message, Message_f2c, (MPI_Fint message))
STROBE_MPI_FN(MPI_Fint, Message_c2f, (MPI_Message message))
/* MPI-1 attribute names, and attributes on datatypes (same sentinels as the MPI_COMM_ ones) */
typedef int (MPI_Copy_function)(MPI_Comm oldcomm, int keyval, void *extra_state, void *attribute_val_in,
                                void *attribute_val_out, int *flag);
typedef int (MPI_Delete_function)(MPI_Comm comm, int keyval, void *attribute_val, void *extra_state);
#define MPI_NULL_COPY_FN   ((MPI_Copy_function *)0)
#define MPI_DUP_FN         ((MPI_Copy_function *)1)
#define MPI_NULL_DELETE_FN ((MPI_Delete_function *)0)
typedef int (MPI_Type_copy_attr_function)(MPI_Datatype oldtype, int type_keyval, void *extra_state,
                                          void *attribute_val_in, void *attribute_val_out, int *flag);
typedef int (MPI_Type_delete_attr_function)(MPI_Datatype datatype, int type_keyval, void *attribute_val,
                                            void *extra_state);
#define MPI_TYPE_NULL_COPY_FN   ((MPI_Type_copy_attr_function *)0)
#define MPI_TYPE_DUP_FN         ((MPI_Type_copy_attr_function *)1)
#define MPI_TYPE_NULL_DELETE_FN ((MPI_Type_delete_attr_function *)0)
STROBE_MPI_FN(int, Keyval_create, (MPI_Copy_function *copy_fn, MPI_Delete_function *delete_fn, int *keyval, void *extra_state))
STROBE_MPI_FN(int, Keyval_free, (int *keyval))
STROBE_MPI_FN(int, Attr_put, (MPI_Comm comm, int keyval, void *attribute_val))
STROBE_MPI_FN(int, Attr_delete, (MPI_Comm comm, int keyval))
STROBE_MPI_FN(int, Type_create_keyval, (MPI_Type_copy_attr_function *type_copy_attr_fn,
                                        MPI_Type_delete_attr_function *type_delete_attr_fn, int *type_keyval,
                                        void *extra_state))
STROBE_MPI_FN(int, Type_free_keyval, (int *type_keyval))
STROBE_MPI_FN(int, Type_set_attr, (MPI_Datatype datatype, int type_keyval, void *attribute_val))
STROBE_MPI_FN(int, Type_get_attr, (MPI_Datatype datatype, int type_keyval, void *attribute_val, int *flag))
STROBE_MPI_FN(int, Type_delete_attr, (MPI_Datatype datatype, int type_keyval))
/* the MPI-1 bound markers */
#define MPI_LB                    ((MPI_Datatype)39)
#define MPI_UB                    ((MPI_Datatype)40)
/* The Fortran datatypes, with mpif.h's values (the Fortran-only ones are negative) */
#define MPI_CHARACTER             ((MPI_Datatype)41)
#define MPI_INTEGER               ((MPI_Datatype)42)
#define MPI_REAL                  ((MPI_Datatype)43)
#define MPI_DOUBLE_PRECISION      ((MPI_Datatype)44)
#define MPI_2INTEGER              ((MPI_Datatype)45)
#define MPI_LOGICAL               ((MPI_Datatype)-101)
#define MPI_2REAL                 ((MPI_Datatype)-104)
#define MPI_2DOUBLE_PRECISION     ((MPI_Datatype)-105)
#define MPI_ORDER_C       56
#define MPI_ORDER_FORTRAN 57
STROBE_MPI_FN(int, Get_elements, (const MPI_Status *status, MPI_Datatype datatype, int *count))
STROBE_MPI_FN(int, Get_elements_x, (const MPI_Status *status, MPI_Datatype datatype, MPI_Count *count))
STROBE_MPI_FN(int, Type_size_x, (MPI_Datatype datatype, MPI_Count *size))
STROBE_MPI_FN(int, Type_get_extent_x, (MPI_Datatype datatype, MPI_Count *lb, MPI_Count *extent))
STROBE_MPI_FN(int, Type_get_true_extent_x, (MPI_Datatype datatype, MPI_Count *true_lb, MPI_Count *true_extent))
STROBE_MPI_FN(int, Type_extent, (MPI_Datatype datatype, MPI_Aint *extent))
STROBE_MPI_FN(int, Type_lb, (MPI_Datatype datatype, MPI_Aint *displacement))
STROBE_MPI_FN(int, Type_ub, (MPI_Datatype datatype, MPI_Aint *displacement))
STROBE_MPI_FN(int, Type_hvector, (int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype, MPI_Datatype *newtype))
STROBE_MPI_FN(int, Type_hindexed, (int count, const int *array_of_blocklengths, const MPI_Aint *array_of_displacements,
                                   MPI_Datatype oldtype, MPI_Datatype *newtype))
STROBE_MPI_FN(int, Type_struct, (int count, const int *array_of_blocklengths, const MPI_Aint *array_of_displacements,
                                 const MPI_Datatype *array_of_types, MPI_Datatype *newtype))
STROBE_MPI_FN(int, Type_create_hindexed_block, (int count, int blocklength, const MPI_Aint array_of_displacements[],
                                                MPI_Datatype oldtype, MPI_Datatype *newtype))
STROBE_MPI_FN(int, Type_create_subarray, (int ndims, const int array_of_sizes[], const int array_of_subsizes[],
                                          const int array_of_starts[], int order, MPI_Datatype oldtype,
                                          MPI_Datatype *newtype))
STROBE_MPI_FN(int, Type_set_name, (MPI_Datatype datatype, const char *type_name))
STROBE_MPI_FN(int, Type_get_name, (MPI_Datatype datatype, char *type_name, int *resultlen))
/* ---- mpi13b (issue 13): datatype contents, external32, darray, size-specific types ---- */
/* Named predefined types of their own (MPI_Type_get_name gives these names); the optional
 * ones strobe does not have (Fortran's 16-byte REAL, COMPLEX and INTEGER) are
 * MPI_DATATYPE_NULL, as MPI-3.1 16.2.5 allows. */
#define MPI_INTEGER1              ((MPI_Datatype)46)
#define MPI_INTEGER2              ((MPI_Datatype)47)
#define MPI_INTEGER4              ((MPI_Datatype)48)
#define MPI_INTEGER8              ((MPI_Datatype)49)
#define MPI_REAL4                 ((MPI_Datatype)50)
#define MPI_REAL8                 ((MPI_Datatype)51)
#define MPI_COMPLEX8              ((MPI_Datatype)52)
#define MPI_COMPLEX16             ((MPI_Datatype)53)
#define MPI_CXX_BOOL              ((MPI_Datatype)54)
#define MPI_CXX_FLOAT_COMPLEX     ((MPI_Datatype)55)
#define MPI_CXX_DOUBLE_COMPLEX    ((MPI_Datatype)58)
#define MPI_CXX_LONG_DOUBLE_COMPLEX ((MPI_Datatype)59)
#define MPI_INTEGER16             ((MPI_Datatype)0)
#define MPI_REAL16                ((MPI_Datatype)0)
#define MPI_COMPLEX32             ((MPI_Datatype)0)
#define MPI_COMBINER_HVECTOR_INTEGER  17
#define MPI_COMBINER_HINDEXED_INTEGER 18
#define MPI_COMBINER_STRUCT_INTEGER   19
#define MPI_TYPECLASS_REAL    1
#define MPI_TYPECLASS_INTEGER 2
#define MPI_TYPECLASS_COMPLEX 3
#define MPI_DISTRIBUTE_BLOCK     121
#define MPI_DISTRIBUTE_CYCLIC    122
#define MPI_DISTRIBUTE_NONE      123
#define MPI_DISTRIBUTE_DFLT_DARG (-49767)
STROBE_MPI_FN(int, Type_get_contents, (MPI_Datatype datatype, int max_integers, int max_addresses,
                                       int max_datatypes, int array_of_integers[], MPI_Aint array_of_addresses[],
                                       MPI_Datatype array_of_datatypes[]))
STROBE_MPI_FN(int, Type_match_size, (int typeclass, int size, MPI_Datatype *datatype))
STROBE_MPI_FN(int, Pack_external, (const char datarep[], const void *inbuf, int incount, MPI_Datatype datatype,
                                   void *outbuf, MPI_Aint outsize, MPI_Aint *position))
STROBE_MPI_FN(int, Pack_external_size, (const char datarep[], int incount, MPI_Datatype datatype, MPI_Aint *size))
STROBE_MPI_FN(int, Unpack_external, (const char datarep[], const void *inbuf, MPI_Aint insize, MPI_Aint *position,
                                     void *outbuf, int outcount, MPI_Datatype datatype))
STROBE_MPI_FN(int, Type_create_darray, (int size, int rank, int ndims, const int array_of_gsizes[],
                                        const int array_of_distribs[], const int array_of_dargs[],
                                        const int array_of_psizes[], int order, MPI_Datatype oldtype,
                                        MPI_Datatype *newtype))
STROBE_MPI_FN(int, Type_create_f90_integer, (int r, MPI_Datatype *newtype))
STROBE_MPI_FN(int, Type_create_f90_real, (int p, int r, MPI_Datatype *newtype))
STROBE_MPI_FN(int, Type_create_f90_complex, (int p, int r, MPI_Datatype *newtype))
/* ---- end of mpi13b ---- */
/* user error handlers, classes and codes */
typedef void (MPI_Comm_errhandler_function)(MPI_Comm *comm, int *error_code, ...);
typedef MPI_Comm_errhandler_function MPI_Comm_errhandler_fn;
typedef MPI_Comm_errhandler_function MPI_Handler_function;
STROBE_MPI_FN(int, Comm_create_errhandler, (MPI_Comm_errhandler_function *comm_errhandler_fn, MPI_Errhandler *errhandler))
STROBE_MPI_FN(int, Errhandler_create, (MPI_Handler_function *function, MPI_Errhandler *errhandler))
STROBE_MPI_FN(int, Errhandler_set, (MPI_Comm comm, MPI_Errhandler errhandler))
STROBE_MPI_FN(int, Errhandler_get, (MPI_Comm comm, MPI_Errhandler *errhandler))
STROBE_MPI_FN(int, Comm_call_errhandler, (MPI_Comm comm, int errorcode))
STROBE_MPI_FN(int, Add_error_class, (int *errorclass))
STROBE_MPI_FN(int, Add_error_code, (int errorclass, int *errorcode))
STROBE_MPI_FN(int, Add_error_string, (int errorcode, const char *string))
STROBE_MPI_FN(int, Group_union, (MPI_Group group1, MPI_Group group2, MPI_Group *newgroup))
STROBE_MPI_FN(int, Group_intersection, (MPI_Group group1, MPI_Group group2, MPI_Group *newgroup))
STROBE_MPI_FN(int, Group_difference, (MPI_Group group1, MPI_Group group2, MPI_Group *newgroup))
STROBE_MPI_FN(int, Group_range_excl, (MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup))

/* ---- issue 13 (mpi13a): MPI-4 persistent collectives (strobe-mpi's pcoll.rs) */
STROBE_MPI_FN(int, Barrier_init, (MPI_Comm comm, MPI_Info info, MPI_Request *request))
STROBE_MPI_FN(int, Bcast_init, (void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request))
STROBE_MPI_FN(int, Reduce_init, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request))
STROBE_MPI_FN(int, Allreduce_init, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request))
STROBE_MPI_FN(int, Scan_init, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request))
STROBE_MPI_FN(int, Exscan_init, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request))
STROBE_MPI_FN(int, Reduce_scatter_init, (const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request))
STROBE_MPI_FN(int, Reduce_scatter_block_init, (const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request))
STROBE_MPI_FN(int, Gather_init, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request))
STROBE_MPI_FN(int, Gatherv_init, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request))
STROBE_MPI_FN(int, Scatter_init, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request))
STROBE_MPI_FN(int, Scatterv_init, (const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request))
STROBE_MPI_FN(int, Allgather_init, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request))
STROBE_MPI_FN(int, Allgatherv_init, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request))
STROBE_MPI_FN(int, Alltoall_init, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request))
STROBE_MPI_FN(int, Alltoallv_init, (const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request))
STROBE_MPI_FN(int, Alltoallw_init, (const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Info info, MPI_Request *request))
/* ---- issue 13 (mpi13a): nonblocking communicator duplication (strobe-mpi's idup.rs) */
STROBE_MPI_FN(int, Comm_idup, (MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request))
STROBE_MPI_FN(int, Comm_idup_with_info, (MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm, MPI_Request *request))
/* ---- issue 13 (mpi13a): topologies (strobe-mpi's topo.rs, topo_dist.rs) */
#define MPI_GRAPH 1
#define MPI_CART 2
#define MPI_DIST_GRAPH 3
#define MPI_UNWEIGHTED ((int *) 1)
#define MPI_WEIGHTS_EMPTY ((int *) 2)
STROBE_MPI_FN(int, Cart_create, (MPI_Comm comm_old, int ndims, const int dims[], const int periods[], int reorder, MPI_Comm *comm_cart))
STROBE_MPI_FN(int, Cart_coords, (MPI_Comm comm, int rank, int maxdims, int coords[]))
STROBE_MPI_FN(int, Cart_rank, (MPI_Comm comm, const int coords[], int *rank))
STROBE_MPI_FN(int, Cart_shift, (MPI_Comm comm, int direction, int disp, int *rank_source, int *rank_dest))
STROBE_MPI_FN(int, Cart_sub, (MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm))
STROBE_MPI_FN(int, Cart_get, (MPI_Comm comm, int maxdims, int dims[], int periods[], int coords[]))
STROBE_MPI_FN(int, Cart_map, (MPI_Comm comm, int ndims, const int dims[], const int periods[], int *newrank))
STROBE_MPI_FN(int, Cartdim_get, (MPI_Comm comm, int *ndims))
STROBE_MPI_FN(int, Graph_create, (MPI_Comm comm_old, int nnodes, const int index[], const int edges[], int reorder, MPI_Comm *comm_graph))
STROBE_MPI_FN(int, Graph_get, (MPI_Comm comm, int maxindex, int maxedges, int index[], int edges[]))
STROBE_MPI_FN(int, Graph_neighbors, (MPI_Comm comm, int rank, int maxneighbors, int neighbors[]))
STROBE_MPI_FN(int, Graph_neighbors_count, (MPI_Comm comm, int rank, int *nneighbors))
STROBE_MPI_FN(int, Graph_map, (MPI_Comm comm, int nnodes, const int index[], const int edges[], int *newrank))
STROBE_MPI_FN(int, Graphdims_get, (MPI_Comm comm, int *nnodes, int *nedges))
STROBE_MPI_FN(int, Dist_graph_create, (MPI_Comm comm_old, int n, const int sources[], const int degrees[], const int destinations[], const int weights[], MPI_Info info, int reorder, MPI_Comm *comm_dist_graph))
STROBE_MPI_FN(int, Dist_graph_create_adjacent, (MPI_Comm comm_old, int indegree, const int sources[], const int sourceweights[], int outdegree, const int destinations[], const int destweights[], MPI_Info info, int reorder, MPI_Comm *comm_dist_graph))
STROBE_MPI_FN(int, Dist_graph_neighbors, (MPI_Comm comm, int maxindegree, int sources[], int sourceweights[], int maxoutdegree, int destinations[], int destweights[]))
STROBE_MPI_FN(int, Dist_graph_neighbors_count, (MPI_Comm comm, int *indegree, int *outdegree, int *weighted))
STROBE_MPI_FN(int, Topo_test, (MPI_Comm comm, int *status))
/* ---- issue 13 (mpi13a): neighbour collectives (strobe-mpi's neighbor.rs) */
STROBE_MPI_FN(int, Neighbor_allgather, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm))
STROBE_MPI_FN(int, Neighbor_allgatherv, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm))
STROBE_MPI_FN(int, Neighbor_alltoall, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm))
STROBE_MPI_FN(int, Neighbor_alltoallv, (const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm))
STROBE_MPI_FN(int, Neighbor_alltoallw, (const void *sendbuf, const int sendcounts[], const MPI_Aint sdispls[], const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[], const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm))
STROBE_MPI_FN(int, Ineighbor_allgather, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Ineighbor_allgatherv, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Ineighbor_alltoall, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Ineighbor_alltoallv, (const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Ineighbor_alltoallw, (const void *sendbuf, const int sendcounts[], const MPI_Aint sdispls[], const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[], const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Request *request))
/* ---- issue 13 (mpi13a): sessions (strobe-mpi's session.rs) */
typedef int MPI_Session;
#define MPI_SESSION_NULL ((MPI_Session)0)
#define MPI_MAX_PSET_NAME_LEN 256
#define MPI_MAX_STRINGTAG_LEN 256
#define MPI_COMM_TYPE_HW_UNGUIDED 2
#define MPI_COMM_TYPE_HW_GUIDED 3
STROBE_MPI_FN(int, Session_init, (MPI_Info info, MPI_Errhandler errhandler, MPI_Session *session))
STROBE_MPI_FN(int, Session_finalize, (MPI_Session *session))
STROBE_MPI_FN(int, Session_get_info, (MPI_Session session, MPI_Info *info_used))
STROBE_MPI_FN(int, Session_get_num_psets, (MPI_Session session, MPI_Info info, int *npset_names))
STROBE_MPI_FN(int, Session_get_nth_pset, (MPI_Session session, MPI_Info info, int n, int *pset_len, char *pset_name))
STROBE_MPI_FN(int, Session_get_pset_info, (MPI_Session session, const char *pset_name, MPI_Info *info))
STROBE_MPI_FN(int, Group_from_session_pset, (MPI_Session session, const char *pset_name, MPI_Group *newgroup))
STROBE_MPI_FN(int, Comm_create_from_group, (MPI_Group group, const char *stringtag, MPI_Info info, MPI_Errhandler errhandler, MPI_Comm *newcomm))
/* ---- issue 13 (mpi13a): large-count calls (strobe-mpi's large_count.rs) */
STROBE_MPI_FN(int, Send_c, (const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm))
STROBE_MPI_FN(int, Recv_c, (void *buf, MPI_Count count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status *status))
STROBE_MPI_FN(int, Isend_c, (const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Irecv_c, (void *buf, MPI_Count count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Request *request))
STROBE_MPI_FN(int, Bcast_c, (void *buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm))
STROBE_MPI_FN(int, Reduce_c, (const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm))
STROBE_MPI_FN(int, Allreduce_c, (const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm))
STROBE_MPI_FN(int, Alltoallv_c, (const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[], MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint rdispls[], MPI_Datatype recvtype, MPI_Comm comm))
STROBE_MPI_FN(int, Get_count_c, (const MPI_Status *status, MPI_Datatype datatype, MPI_Count *count))
STROBE_MPI_FN(int, Type_size_c, (MPI_Datatype datatype, MPI_Count *size))
STROBE_MPI_FN(int, Type_get_extent_c, (MPI_Datatype datatype, MPI_Count *lb, MPI_Count *extent))
STROBE_MPI_FN(int, Type_get_true_extent_c, (MPI_Datatype datatype, MPI_Count *true_lb, MPI_Count *true_extent))
STROBE_MPI_FN(int, Type_contiguous_c, (MPI_Count count, MPI_Datatype oldtype, MPI_Datatype *newtype))
STROBE_MPI_FN(int, Type_create_hindexed_c, (MPI_Count count, const MPI_Count array_of_blocklengths[], const MPI_Count array_of_displacements[], MPI_Datatype oldtype, MPI_Datatype *newtype))
STROBE_MPI_FN(int, Type_create_indexed_block_c, (MPI_Count count, MPI_Count blocklength, const MPI_Count array_of_displacements[], MPI_Datatype oldtype, MPI_Datatype *newtype))
/* ---- end of issue 13 (mpi13a) */

#undef STROBE_MPI_FN

#ifdef __cplusplus
}
#endif

#endif /* STROBE_MPI_H */
