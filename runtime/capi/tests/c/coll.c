/* Collectives: every data-movement collective (also MPI_IN_PLACE), every reduction with
 * predefined ops (pair types for MINLOC/MAXLOC, long double), user-defined ops (also a
 * non-commutative one), Reduce_local. Any rank count. */
#include "check.h"
#include <string.h>

/* 2x2 integer matrices, multiplied: associative, not commutative. */
typedef struct { int a, b, c, d; } mat;
static void matmul(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    mat *x = in, *y = inout;
    for (int i = 0; i < *len; i++) {
        mat r = {x[i].a * y[i].a + x[i].b * y[i].c, x[i].a * y[i].b + x[i].b * y[i].d,
                 x[i].c * y[i].a + x[i].d * y[i].c, x[i].c * y[i].b + x[i].d * y[i].d};
        y[i] = r;
    }
}
static mat mat_of(int r) { mat m = {1, r + 1, 0, 1}; if (r % 2) { m.c = 1; } return m; }
static mat mul(mat x, mat y) { int one = 1; matmul(&x, &y, &one, NULL); return y; }

static void isum(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    MPI_Comm w = MPI_COMM_WORLD;
    int root = size - 1;

    OK(MPI_Barrier(w));

    /* Bcast */
    double bc[3] = {0, 0, 0};
    if (rank == root) { bc[0] = 1.5; bc[1] = 2.5; bc[2] = 3.5; }
    OK(MPI_Bcast(bc, 3, MPI_DOUBLE, root, w));
    CHECK(bc[0] == 1.5 && bc[2] == 3.5);

    /* Reduce / Allreduce with every predefined op on int; IN_PLACE variants. */
    int v = rank + 1, r = -1;
    OK(MPI_Reduce(&v, &r, 1, MPI_INT, MPI_SUM, root, w));
    if (rank == root) CHECK(r == size * (size + 1) / 2);
    int in_place = rank + 1;
    if (rank == 0) OK(MPI_Reduce(MPI_IN_PLACE, &in_place, 1, MPI_INT, MPI_MAX, 0, w));
    else OK(MPI_Reduce(&in_place, NULL, 1, MPI_INT, MPI_MAX, 0, w));
    if (rank == 0) CHECK(in_place == size);
    struct { MPI_Op op; int want; } ops[] = {
        {MPI_SUM, size * (size + 1) / 2}, {MPI_MAX, size}, {MPI_MIN, 1},
        {MPI_LAND, 1}, {MPI_LOR, 1}, {MPI_LXOR, size % 2}, {MPI_BOR, 0}, {MPI_BAND, 0},
    };
    for (unsigned i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        int x = rank + 1, y = -1;
        OK(MPI_Allreduce(&x, &y, 1, MPI_INT, ops[i].op, w));
        if (ops[i].op == MPI_BOR) { int e = 0; for (int k = 1; k <= size; k++) e |= k; ops[i].want = e; }
        if (ops[i].op == MPI_BAND) { int e = ~0; for (int k = 1; k <= size; k++) e &= k; ops[i].want = e; }
        CHECK(y == ops[i].want);
    }
    long long prod = 2;
    OK(MPI_Allreduce(MPI_IN_PLACE, &prod, 1, MPI_LONG_LONG, MPI_PROD, w));
    CHECK(prod == (1LL << size));
    unsigned char bx = (unsigned char)(1 << (rank % 8)), bxr;
    OK(MPI_Allreduce(&bx, &bxr, 1, MPI_BYTE, MPI_BXOR, w));
    float fmax = (float)rank, fr;
    OK(MPI_Allreduce(&fmax, &fr, 1, MPI_FLOAT, MPI_MAX, w));
    CHECK(fr == (float)(size - 1));

    /* MINLOC / MAXLOC on the pair types. */
    struct { double v; int i; } di = {(double)((rank * 7) % size), rank}, dio;
    OK(MPI_Allreduce(&di, &dio, 1, MPI_DOUBLE_INT, MPI_MAXLOC, w));
    CHECK(dio.v == size - 1);
    struct { int v; int i; } ii = {rank % 2, rank}, iio;
    OK(MPI_Allreduce(&ii, &iio, 1, MPI_2INT, MPI_MINLOC, w));
    CHECK(iio.v == 0 && iio.i == 0);
    struct { float v; int i; } fi = {-(float)rank, rank}, fio;
    OK(MPI_Allreduce(&fi, &fio, 1, MPI_FLOAT_INT, MPI_MINLOC, w));
    CHECK(fio.i == size - 1);
    struct { long v; int i; } li = {5, rank}, lio;
    OK(MPI_Allreduce(&li, &lio, 1, MPI_LONG_INT, MPI_MAXLOC, w));
    CHECK(lio.v == 5 && lio.i == 0);
    struct { short v; int i; } si = {(short)rank, rank}, sio;
    OK(MPI_Allreduce(&si, &sio, 1, MPI_SHORT_INT, MPI_MAXLOC, w));
    CHECK(sio.i == size - 1);

    /* long double, reduced on the rank side. */
    long double ld = (long double)rank + 0.5L, ldr = 0;
    OK(MPI_Allreduce(&ld, &ldr, 1, MPI_LONG_DOUBLE, MPI_SUM, w));
    CHECK(ldr == (long double)size * (size - 1) / 2 + 0.5L * size);
    struct { long double v; int i; } ldi = {(long double)(size - rank), rank}, ldio;
    OK(MPI_Allreduce(&ldi, &ldio, 1, MPI_LONG_DOUBLE_INT, MPI_MINLOC, w));
    CHECK(ldio.v == 1 && ldio.i == size - 1);

    /* User ops: commutative sum and non-commutative matrix product, rank order. */
    MPI_Op usum, umat;
    OK(MPI_Op_create(isum, 1, &usum));
    OK(MPI_Op_create(matmul, 0, &umat));
    int commute = -1;
    OK(MPI_Op_commutative(umat, &commute));
    CHECK(commute == 0);
    int us[2] = {rank, 1}, usr[2];
    OK(MPI_Allreduce(us, usr, 2, MPI_INT, usum, w));
    CHECK(usr[0] == size * (size - 1) / 2 && usr[1] == size);
    MPI_Datatype mt;
    OK(MPI_Type_contiguous(4, MPI_INT, &mt));
    OK(MPI_Type_commit(&mt));
    mat m = mat_of(rank), mr, want = mat_of(0);
    for (int k = 1; k < size; k++) want = mul(want, mat_of(k));
    OK(MPI_Reduce(&m, &mr, 1, mt, umat, root, w));
    if (rank == root) CHECK(mr.a == want.a && mr.b == want.b && mr.c == want.c && mr.d == want.d);
    OK(MPI_Allreduce(&m, &mr, 1, mt, umat, w));
    CHECK(mr.a == want.a && mr.b == want.b && mr.c == want.c && mr.d == want.d);
    mat sc, pre = mat_of(0);
    for (int k = 1; k <= rank; k++) pre = mul(pre, mat_of(k));
    OK(MPI_Scan(&m, &sc, 1, mt, umat, w));
    CHECK(sc.a == pre.a && sc.b == pre.b && sc.c == pre.c && sc.d == pre.d);
    mat ex = {9, 9, 9, 9};
    OK(MPI_Exscan(&m, &ex, 1, mt, umat, w));
    if (rank == 0) CHECK(ex.a == 9);
    else {
        mat p = mat_of(0);
        for (int k = 1; k < rank; k++) p = mul(p, mat_of(k));
        CHECK(ex.a == p.a && ex.b == p.b && ex.c == p.c && ex.d == p.d);
    }
    int *rsb = malloc(sizeof(int) * size), rsr = -1;
    for (int k = 0; k < size; k++) rsb[k] = k + rank;
    OK(MPI_Reduce_scatter_block(rsb, &rsr, 1, MPI_INT, usum, w));
    CHECK(rsr == size * rank + size * (size - 1) / 2);
    int loc_in[2] = {1, 2}, loc_io[2] = {10, 20};
    OK(MPI_Reduce_local(loc_in, loc_io, 2, MPI_INT, usum));
    CHECK(loc_io[0] == 11 && loc_io[1] == 22);
    OK(MPI_Reduce_local(loc_in, loc_io, 2, MPI_INT, MPI_MAX));
    CHECK(loc_io[0] == 11);
    mat lx = mat_of(1), ly = mat_of(2), lz = mul(mat_of(1), mat_of(2));
    OK(MPI_Reduce_local(&lx, &ly, 1, mt, umat));
    CHECK(ly.a == lz.a && ly.b == lz.b && ly.c == lz.c && ly.d == lz.d);
    OK(MPI_Op_free(&usum));
    OK(MPI_Op_free(&umat));
    CHECK(usum == MPI_OP_NULL);

    /* Scan / Exscan with predefined ops. */
    int s = rank + 1, sr = -1, er = -7;
    OK(MPI_Scan(&s, &sr, 1, MPI_INT, MPI_SUM, w));
    CHECK(sr == (rank + 1) * (rank + 2) / 2);
    OK(MPI_Exscan(&s, &er, 1, MPI_INT, MPI_SUM, w));
    if (rank == 0) CHECK(er == -7); else CHECK(er == rank * (rank + 1) / 2);

    /* Reduce_scatter and Reduce_scatter_block with predefined ops. */
    int *counts = malloc(sizeof(int) * size), total = 0;
    for (int k = 0; k < size; k++) { counts[k] = k + 1; total += k + 1; }
    int *rsin = malloc(sizeof(int) * total), rsout[64];
    for (int k = 0; k < total; k++) rsin[k] = k;
    OK(MPI_Reduce_scatter(rsin, rsout, counts, MPI_INT, MPI_SUM, w));
    int off = rank * (rank + 1) / 2;
    for (int k = 0; k < counts[rank]; k++) CHECK(rsout[k] == (off + k) * size);
    OK(MPI_Reduce_scatter_block(rsb, &rsr, 1, MPI_INT, MPI_SUM, w));
    CHECK(rsr == size * rank + size * (size - 1) / 2);

    /* Gather / Scatter / Allgather / Alltoall and their v variants. */
    int *all = malloc(sizeof(int) * size * 2), mine2[2] = {rank, -rank};
    OK(MPI_Gather(mine2, 2, MPI_INT, all, 2, MPI_INT, root, w));
    if (rank == root) for (int k = 0; k < size; k++) CHECK(all[2 * k] == k && all[2 * k + 1] == -k);
    int back[2];
    OK(MPI_Scatter(all, 2, MPI_INT, back, 2, MPI_INT, root, w));
    if (rank == root) { /* only the root's send buffer is meaningful */ }
    if (rank == root) CHECK(back[0] == rank);
    memset(all, 0, sizeof(int) * size * 2);
    OK(MPI_Allgather(mine2, 2, MPI_INT, all, 2, MPI_INT, w));
    for (int k = 0; k < size; k++) CHECK(all[2 * k] == k && all[2 * k + 1] == -k);
    memset(all, 0, sizeof(int) * size * 2);
    all[2 * rank] = rank; all[2 * rank + 1] = -rank;
    OK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 2, MPI_INT, w));
    for (int k = 0; k < size; k++) CHECK(all[2 * k] == k && all[2 * k + 1] == -k);
    int *a2a_s = malloc(sizeof(int) * size), *a2a_r = malloc(sizeof(int) * size);
    for (int k = 0; k < size; k++) a2a_s[k] = rank * 100 + k;
    OK(MPI_Alltoall(a2a_s, 1, MPI_INT, a2a_r, 1, MPI_INT, w));
    for (int k = 0; k < size; k++) CHECK(a2a_r[k] == k * 100 + rank);
    /* v variants: rank k contributes k+1 ints. */
    int *displs = malloc(sizeof(int) * size), *vbuf = malloc(sizeof(int) * total), mine_v[64];
    for (int k = 0, d = 0; k < size; k++) { displs[k] = d; d += counts[k]; }
    for (int k = 0; k <= rank; k++) mine_v[k] = rank * 10 + k;
    OK(MPI_Gatherv(mine_v, rank + 1, MPI_INT, vbuf, counts, displs, MPI_INT, 0, w));
    if (rank == 0) for (int k = 0; k < size; k++) for (int j = 0; j <= k; j++) CHECK(vbuf[displs[k] + j] == k * 10 + j);
    int sv[64];
    OK(MPI_Scatterv(vbuf, counts, displs, MPI_INT, sv, rank + 1, MPI_INT, 0, w));
    for (int j = 0; j <= rank; j++) CHECK(sv[j] == rank * 10 + j);
    memset(vbuf, 0, sizeof(int) * total);
    OK(MPI_Allgatherv(mine_v, rank + 1, MPI_INT, vbuf, counts, displs, MPI_INT, w));
    for (int k = 0; k < size; k++) for (int j = 0; j <= k; j++) CHECK(vbuf[displs[k] + j] == k * 10 + j);
    int *sc1 = malloc(sizeof(int) * size), *sd1 = malloc(sizeof(int) * size);
    for (int k = 0; k < size; k++) { sc1[k] = 1; sd1[k] = size - 1 - k; a2a_s[k] = rank * 100 + (size - 1 - k); }
    OK(MPI_Alltoallv(a2a_s, sc1, sd1, MPI_INT, a2a_r, sc1, sd1, MPI_INT, w));
    for (int k = 0; k < size; k++) CHECK(a2a_r[size - 1 - k] == k * 100 + rank);

    OK(MPI_Type_free(&mt));
    OK(MPI_Finalize());
    if (rank == 0) printf("coll ok on %d ranks\n", size);
    return 0;
}
