/* Shared by the C ABI test programs: fail loudly with the rank and the line. */
#ifndef STROBE_CAPI_CHECK_H
#define STROBE_CAPI_CHECK_H
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int check_rank(void) {
    int r = -1, init = 0;
    MPI_Initialized(&init);
    if (init) MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

#define CHECK(cond)                                                                       \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "CHECK FAILED on rank %d at %s:%d: %s\n", check_rank(),       \
                    __FILE__, __LINE__, #cond);                                           \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

#define OK(call) CHECK((call) == MPI_SUCCESS)

#endif
