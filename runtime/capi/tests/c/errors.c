/* Error handling. Without arguments: MPI_ERRORS_RETURN on MPI_COMM_WORLD, then every bad
 * call must return its standard error class and the job must keep working. With an
 * argument, the default MPI_ERRORS_ARE_FATAL handler must abort the job:
 *   errors fatal-rank      rank 1 sends to rank 7 (world of fewer ranks)
 *   errors fatal-truncate  rank 1 receives 4 ints into a buffer of 1
 *   errors fatal-comm      rank 0 calls MPI_Barrier on an invalid communicator */
#include "check.h"
#include <string.h>

#define EXPECT(call, cls)                                                                  \
    do {                                                                                   \
        int rc_ = (call), c_ = -1;                                                         \
        MPI_Error_class(rc_, &c_);                                                         \
        if (c_ != (cls)) {                                                                 \
            fprintf(stderr, "rank %d line %d: %s returned class %d, expected %s (%d)\n",   \
                    check_rank(), __LINE__, #call, c_, #cls, cls);                         \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    MPI_Comm w = MPI_COMM_WORLD;
    int x[4] = {1, 2, 3, 4};

    if (argc > 1) {
        if (strcmp(argv[1], "fatal-rank") == 0 && rank == 1) MPI_Send(x, 1, MPI_INT, 7, 0, w);
        if (strcmp(argv[1], "fatal-truncate") == 0) {
            if (rank == 0) MPI_Send(x, 4, MPI_INT, 1, 0, w);
            if (rank == 1) MPI_Recv(x, 1, MPI_INT, 0, 0, w, MPI_STATUS_IGNORE);
        }
        if (strcmp(argv[1], "fatal-comm") == 0 && rank == 0) MPI_Barrier(12345);
        MPI_Barrier(w);
        MPI_Finalize();
        return 0;
    }

    OK(MPI_Comm_set_errhandler(w, MPI_ERRORS_RETURN));
    int peer = (rank + 1) % size;

    EXPECT(MPI_Send(x, 1, MPI_INT, size + 5, 0, w), MPI_ERR_RANK);
    EXPECT(MPI_Send(x, 1, MPI_INT, MPI_ANY_SOURCE, 0, w), MPI_ERR_RANK);
    EXPECT(MPI_Recv(x, 1, MPI_INT, -7, 0, w, MPI_STATUS_IGNORE), MPI_ERR_RANK);
    EXPECT(MPI_Send(x, 1, MPI_INT, peer, -5, w), MPI_ERR_TAG);
    EXPECT(MPI_Recv(x, 1, MPI_INT, peer, -5, w, MPI_STATUS_IGNORE), MPI_ERR_TAG);
    EXPECT(MPI_Send(x, -1, MPI_INT, peer, 0, w), MPI_ERR_COUNT);
    EXPECT(MPI_Send(x, 1, MPI_INT, peer, 0, 12345), MPI_ERR_COMM);
    EXPECT(MPI_Send(x, 1, MPI_INT, peer, 0, MPI_COMM_NULL), MPI_ERR_COMM);
    EXPECT(MPI_Send(x, 1, MPI_DATATYPE_NULL, peer, 0, w), MPI_ERR_TYPE);
    EXPECT(MPI_Send(x, 1, 4321, peer, 0, w), MPI_ERR_TYPE);
    MPI_Datatype unc;
    OK(MPI_Type_vector(2, 1, 2, MPI_INT, &unc));
    EXPECT(MPI_Send(x, 1, unc, peer, 0, w), MPI_ERR_TYPE);
    EXPECT(MPI_Type_free(&(MPI_Datatype){MPI_INT}), MPI_ERR_TYPE);
    OK(MPI_Type_free(&unc));
    EXPECT(MPI_Send(NULL, 5, MPI_INT, peer, 0, w), MPI_ERR_BUFFER);
    EXPECT(MPI_Send(MPI_IN_PLACE, 1, MPI_INT, peer, 0, w), MPI_ERR_BUFFER);
    EXPECT(MPI_Allreduce(x, MPI_IN_PLACE, 1, MPI_INT, MPI_SUM, w), MPI_ERR_BUFFER);
    EXPECT(MPI_Bsend(x, 1, MPI_INT, peer, 0, w), MPI_ERR_BUFFER);
    char small[8];
    OK(MPI_Buffer_attach(small, sizeof small));
    EXPECT(MPI_Bsend(x, 1, MPI_INT, peer, 0, w), MPI_ERR_BUFFER);
    EXPECT(MPI_Buffer_attach(small, sizeof small), MPI_ERR_BUFFER);
    void *bb; int bs;
    OK(MPI_Buffer_detach(&bb, &bs));
    struct { int v, i; } pair = {1, 2}, pout;
    EXPECT(MPI_Allreduce(&pair, &pout, 1, MPI_2INT, MPI_SUM, w), MPI_ERR_OP);
    EXPECT(MPI_Allreduce(x, x + 1, 1, MPI_DOUBLE, MPI_BAND, w), MPI_ERR_OP);
    EXPECT(MPI_Allreduce(x, x + 1, 1, MPI_INT, 999, w), MPI_ERR_OP);
    EXPECT(MPI_Reduce(x, x + 1, 1, MPI_INT, MPI_OP_NULL, 0, w), MPI_ERR_OP);
    MPI_Op sum = MPI_SUM;
    EXPECT(MPI_Op_free(&sum), MPI_ERR_OP);
    EXPECT(MPI_Bcast(x, 1, MPI_INT, size + 3, w), MPI_ERR_ROOT);
    MPI_Comm nc;
    EXPECT(MPI_Comm_split(w, -5, 0, &nc), MPI_ERR_ARG);
    EXPECT(MPI_Comm_free(&(MPI_Comm){MPI_COMM_WORLD}), MPI_ERR_COMM);
    int flag, gs;
    EXPECT(MPI_Comm_get_attr(w, 9999, &bb, &flag), MPI_ERR_KEYVAL);
    EXPECT(MPI_Group_size(12345, &gs), MPI_ERR_GROUP);
    MPI_Request bogus = 777;
    EXPECT(MPI_Wait(&bogus, MPI_STATUS_IGNORE), MPI_ERR_REQUEST);
    EXPECT(MPI_Comm_rank(w, NULL), MPI_ERR_ARG);
    int rs;
    EXPECT(MPI_Comm_remote_size(w, &rs), MPI_ERR_COMM);
    int dims[2] = {2, 0};
    EXPECT(MPI_Dims_create(5, 2, dims), MPI_ERR_DIMS);
    char pk[4];
    int pos = 0;
    EXPECT(MPI_Pack(x, 2, MPI_INT, pk, sizeof pk, &pos, w), MPI_ERR_ARG);
    EXPECT(MPI_Unpack(pk, sizeof pk, &pos, x, 2, MPI_INT, w), MPI_ERR_TRUNCATE);
    EXPECT(MPI_Comm_set_errhandler(w, 99), MPI_ERR_ARG);

    /* Truncation: blocking, through Wait, and through Waitall (MPI_ERR_IN_STATUS). */
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (int how = 0; how < 3; how++) {
        MPI_Request rq[2];
        MPI_Status sts[2];
        OK(MPI_Isend(x, 4, MPI_INT, right, 60 + how, w, &rq[0]));
        int one;
        if (how == 0) {
            EXPECT(MPI_Recv(&one, 1, MPI_INT, left, 60, w, MPI_STATUS_IGNORE), MPI_ERR_TRUNCATE);
            OK(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
        } else if (how == 1) {
            OK(MPI_Irecv(&one, 1, MPI_INT, left, 61, w, &rq[1]));
            EXPECT(MPI_Wait(&rq[1], MPI_STATUS_IGNORE), MPI_ERR_TRUNCATE);
            OK(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
        } else {
            OK(MPI_Irecv(&one, 1, MPI_INT, left, 62, w, &rq[1]));
            EXPECT(MPI_Waitall(2, rq, sts), MPI_ERR_IN_STATUS);
            CHECK(sts[0].MPI_ERROR == MPI_SUCCESS && sts[1].MPI_ERROR == MPI_ERR_TRUNCATE);
        }
    }

    /* Error strings and classes. */
    char msg[MPI_MAX_ERROR_STRING];
    int len, cls;
    OK(MPI_Error_string(MPI_ERR_RANK, msg, &len));
    CHECK(strstr(msg, "MPI_ERR_RANK") != NULL && len == (int)strlen(msg));
    OK(MPI_Error_string(MPI_SUCCESS, msg, &len));
    OK(MPI_Error_class(MPI_ERR_TRUNCATE, &cls)); CHECK(cls == MPI_ERR_TRUNCATE);
    EXPECT(MPI_Error_string(9999, msg, &len), MPI_ERR_ARG);
    EXPECT(MPI_Error_class(-4, &cls), MPI_ERR_ARG);

    /* Nothing above broke the job. */
    int one = 1, all = 0;
    OK(MPI_Allreduce(&one, &all, 1, MPI_INT, MPI_SUM, w));
    CHECK(all == size);
    OK(MPI_Finalize());
    if (rank == 0) printf("errors ok on %d ranks\n", size);
    return 0;
}
