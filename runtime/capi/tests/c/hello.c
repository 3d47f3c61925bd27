/* Prints exactly one line per rank (the stdout test compares it); with an argument
 * "sleep", rank 0 sleeps far past any timeout instead of finishing. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1 && strcmp(argv[1], "sleep") == 0 && rank == 0) sleep(600);
    MPI_Barrier(MPI_COMM_WORLD);
    printf("hello from %d of %d%s%s\n", rank, size, getenv("HELLO_EXTRA") ? " " : "",
           getenv("HELLO_EXTRA") ? getenv("HELLO_EXTRA") : "");
    MPI_Finalize();
    return 0;
}
