/* Reductions on C long double, which Rust has no type for. Called by the C layer's
 * rank-side reductions (src/reduce.rs). op uses the MPI_Op numbering of mpi.h. */
#include <stddef.h>

typedef struct { long double v; int i; } strobe_ldi;

int strobe_ld_reduce(int op, const long double *in, long double *inout, size_t n) {
    for (size_t k = 0; k < n; k++) {
        long double a = in[k], b = inout[k];
        switch (op) {
        case 1: inout[k] = a > b ? a : b; break;        /* MPI_MAX */
        case 2: inout[k] = a < b ? a : b; break;        /* MPI_MIN */
        case 3: inout[k] = a + b; break;                /* MPI_SUM */
        case 4: inout[k] = a * b; break;                /* MPI_PROD */
        /* The logical ops, on floating types as MPICH allows them: 0 is false. */
        case 5: inout[k] = (a != 0) && (b != 0); break; /* MPI_LAND */
        case 7: inout[k] = (a != 0) || (b != 0); break; /* MPI_LOR */
        case 9: inout[k] = (a != 0) != (b != 0); break; /* MPI_LXOR */
        case 13: break;                                 /* MPI_REPLACE: the later operand */
        case 14: inout[k] = a; break;                   /* MPI_NO_OP: the earlier operand */
        default: return 0;
        }
    }
    return 1;
}

int strobe_ldi_reduce(int op, const strobe_ldi *in, strobe_ldi *inout, size_t n) {
    for (size_t k = 0; k < n; k++) {
        strobe_ldi a = in[k], b = inout[k];
        int take_a;
        switch (op) {
        case 11: take_a = a.v < b.v || (a.v == b.v && a.i < b.i); break; /* MPI_MINLOC */
        case 12: take_a = a.v > b.v || (a.v == b.v && a.i < b.i); break; /* MPI_MAXLOC */
        case 13: take_a = 0; break;
        case 14: take_a = 1; break;
        default: return 0;
        }
        if (take_a) inout[k] = a;
    }
    return 1;
}

/* MPI_PROD on the complex types, with C's own complex product (as other MPI libraries
 * compute it): inout[k] = in[k] * inout[k]. kind: 0 float, 1 double, 2 long double. */
#include <complex.h>

int strobe_complex_prod(int kind, const void *in, void *inout, size_t n) {
    switch (kind) {
    case 0: {
        const float _Complex *a = in;
        float _Complex *b = inout;
        for (size_t k = 0; k < n; k++) b[k] = a[k] * b[k];
        return 1;
    }
    case 1: {
        const double _Complex *a = in;
        double _Complex *b = inout;
        for (size_t k = 0; k < n; k++) b[k] = a[k] * b[k];
        return 1;
    }
    case 2: {
        const long double _Complex *a = in;
        long double _Complex *b = inout;
        for (size_t k = 0; k < n; k++) b[k] = a[k] * b[k];
        return 1;
    }
    default:
        return 0;
    }
}
