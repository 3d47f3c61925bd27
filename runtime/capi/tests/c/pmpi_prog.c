/* Three sends around a ring; run under the PMPI tool, each rank reports 3. */
#include "check.h"

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    for (int i = 0; i < 3; i++) {
        int v = rank, in;
        MPI_Request r;
        OK(MPI_Irecv(&in, 1, MPI_INT, (rank + size - 1) % size, i, MPI_COMM_WORLD, &r));
        OK(MPI_Send(&v, 1, MPI_INT, (rank + 1) % size, i, MPI_COMM_WORLD));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK(in == (rank + size - 1) % size);
    }
    OK(MPI_Finalize());
    return 0;
}
