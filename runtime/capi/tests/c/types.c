/* Derived datatypes: constructors, size/extent/envelope, and non-contiguous data through
 * point-to-point, non-blocking receives and collectives. Any rank count >= 2. */
#include "check.h"
#include <stddef.h>
#include <string.h>

typedef struct { char tag; double x; int n[3]; } rec;

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    MPI_Comm w = MPI_COMM_WORLD;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int sz, ni, na, nd, comb;
    MPI_Aint lb, ext;

    /* Predefined sizes. */
    OK(MPI_Type_size(MPI_INT, &sz)); CHECK(sz == 4);
    OK(MPI_Type_size(MPI_LONG_DOUBLE, &sz)); CHECK(sz == (int)sizeof(long double));
    OK(MPI_Type_size(MPI_DOUBLE_INT, &sz)); CHECK(sz == 16);
    OK(MPI_Type_get_envelope(MPI_INT, &ni, &na, &nd, &comb)); CHECK(comb == MPI_COMBINER_NAMED);

    /* Vector: a column of a 4x5 matrix. */
    MPI_Datatype col;
    OK(MPI_Type_vector(4, 1, 5, MPI_DOUBLE, &col));
    OK(MPI_Type_commit(&col));
    OK(MPI_Type_size(col, &sz)); CHECK(sz == 32);
    OK(MPI_Type_get_extent(col, &lb, &ext)); CHECK(lb == 0 && ext == (3 * 5 + 1) * 8);
    OK(MPI_Type_get_envelope(col, &ni, &na, &nd, &comb)); CHECK(comb == MPI_COMBINER_VECTOR && ni == 3 && nd == 1);
    double mat[4][5], got[4];
    for (int i = 0; i < 4; i++) for (int j = 0; j < 5; j++) mat[i][j] = rank * 100 + i * 10 + j;
    /* send column 2, receive as 4 contiguous doubles */
    OK(MPI_Sendrecv(&mat[0][2], 1, col, right, 1, got, 4, MPI_DOUBLE, left, 1, w, MPI_STATUS_IGNORE));
    for (int i = 0; i < 4; i++) CHECK(got[i] == left * 100 + i * 10 + 2);
    /* receive into a column with Irecv (unpacked at completion) */
    double into[4][5];
    memset(into, 0, sizeof into);
    MPI_Request rq;
    OK(MPI_Irecv(&into[0][4], 1, col, left, 2, w, &rq));
    OK(MPI_Send(&mat[0][1], 1, col, right, 2, w));
    MPI_Status st;
    OK(MPI_Wait(&rq, &st));
    int cnt;
    OK(MPI_Get_count(&st, col, &cnt)); CHECK(cnt == 1);
    OK(MPI_Get_count(&st, MPI_DOUBLE, &cnt)); CHECK(cnt == 4);
    for (int i = 0; i < 4; i++) CHECK(into[i][4] == left * 100 + i * 10 + 1 && into[i][3] == 0);

    /* Pack and Unpack a column plus an int, then unpack them elsewhere. */
    {
        char packed[256];
        int pos = 0, psz, tail = 1234 + rank;
        OK(MPI_Pack_size(1, col, w, &psz)); CHECK(psz == 32);
        OK(MPI_Pack(&mat[0][3], 1, col, packed, sizeof packed, &pos, w));
        OK(MPI_Pack(&tail, 1, MPI_INT, packed, sizeof packed, &pos, w));
        CHECK(pos == 36);
        double un[4][5];
        int t2 = 0;
        memset(un, 0, sizeof un);
        pos = 0;
        OK(MPI_Unpack(packed, pos + 36, &pos, &un[0][1], 1, col, w));
        OK(MPI_Unpack(packed, 36, &pos, &t2, 1, MPI_INT, w));
        CHECK(pos == 36 && t2 == tail);
        for (int i = 0; i < 4; i++) CHECK(un[i][1] == mat[i][3] && un[i][0] == 0);
        /* packed data travels as MPI_PACKED */
        char rp[256];
        MPI_Status pst;
        OK(MPI_Sendrecv(packed, 36, MPI_PACKED, right, 9, rp, sizeof rp, MPI_PACKED, left, 9, w, &pst));
        int pc;
        OK(MPI_Get_count(&pst, MPI_PACKED, &pc)); CHECK(pc == 36);
        pos = 32;
        OK(MPI_Unpack(rp, pc, &pos, &t2, 1, MPI_INT, w));
        CHECK(t2 == 1234 + left);
    }

    /* Contiguous and indexed. */
    MPI_Datatype three, idx;
    OK(MPI_Type_contiguous(3, MPI_INT, &three));
    int bl[3] = {2, 1, 3}, dp[3] = {0, 4, 7};
    OK(MPI_Type_indexed(3, bl, dp, MPI_INT, &idx));
    OK(MPI_Type_commit(&three));
    OK(MPI_Type_commit(&idx));
    OK(MPI_Type_size(idx, &sz)); CHECK(sz == 24);
    OK(MPI_Type_get_extent(idx, &lb, &ext)); CHECK(ext == 40);
    int src[10], dst[10];
    for (int i = 0; i < 10; i++) { src[i] = rank * 10 + i; dst[i] = -1; }
    OK(MPI_Sendrecv(src, 1, idx, right, 3, dst, 1, idx, left, 3, w, MPI_STATUS_IGNORE));
    int pick[6] = {0, 1, 4, 7, 8, 9};
    for (int i = 0; i < 6; i++) CHECK(dst[pick[i]] == left * 10 + pick[i]);
    CHECK(dst[2] == -1 && dst[5] == -1);

    /* Struct with padding, and resized to the C struct's extent. */
    MPI_Datatype rt, rrt;
    int rbl[3] = {1, 1, 3};
    MPI_Aint rdp[3] = {offsetof(rec, tag), offsetof(rec, x), offsetof(rec, n)};
    MPI_Datatype rty[3] = {MPI_CHAR, MPI_DOUBLE, MPI_INT};
    OK(MPI_Type_create_struct(3, rbl, rdp, rty, &rt));
    OK(MPI_Type_create_resized(rt, 0, sizeof(rec), &rrt));
    OK(MPI_Type_commit(&rrt));
    OK(MPI_Type_size(rrt, &sz)); CHECK(sz == 1 + 8 + 12);
    OK(MPI_Type_get_extent(rrt, &lb, &ext)); CHECK(lb == 0 && ext == (MPI_Aint)sizeof(rec));
    OK(MPI_Type_get_envelope(rrt, &ni, &na, &nd, &comb)); CHECK(comb == MPI_COMBINER_RESIZED);
    OK(MPI_Type_get_envelope(rt, &ni, &na, &nd, &comb)); CHECK(comb == MPI_COMBINER_STRUCT && ni == 4 && na == 3 && nd == 3);
    rec recs[2], rin[2];
    for (int i = 0; i < 2; i++) { recs[i].tag = 'a' + rank; recs[i].x = rank + i * 0.5; recs[i].n[0] = i; recs[i].n[1] = rank; recs[i].n[2] = 7; }
    memset(rin, 0, sizeof rin);
    OK(MPI_Sendrecv(recs, 2, rrt, right, 4, rin, 2, rrt, left, 4, w, MPI_STATUS_IGNORE));
    for (int i = 0; i < 2; i++) CHECK(rin[i].tag == 'a' + left && rin[i].x == left + i * 0.5 && rin[i].n[0] == i && rin[i].n[1] == left && rin[i].n[2] == 7);

    /* Collectives with derived types: Bcast a column, Gather records, Allreduce over a
     * contiguous type of ints (still reduced by the runtime). */
    double bm[4][5];
    for (int i = 0; i < 4; i++) for (int j = 0; j < 5; j++) bm[i][j] = (rank == 0) ? i : -1;
    OK(MPI_Bcast(&bm[0][3], 1, col, 0, w));
    for (int i = 0; i < 4; i++) CHECK(bm[i][3] == i && (rank == 0 || bm[i][2] == -1));
    rec *allr = malloc(sizeof(rec) * size);
    OK(MPI_Gather(recs, 1, rrt, allr, 1, rrt, 0, w));
    if (rank == 0) for (int k = 0; k < size; k++) CHECK(allr[k].tag == 'a' + k && allr[k].n[1] == k);
    int t3[3] = {rank, 1, 2}, t3r[3];
    OK(MPI_Allreduce(t3, t3r, 1, three, MPI_SUM, w));
    CHECK(t3r[0] == size * (size - 1) / 2 && t3r[1] == size && t3r[2] == 2 * size);
    /* Reduce with a strided type of doubles. */
    double rm[4][5], rmr[4][5];
    for (int i = 0; i < 4; i++) for (int j = 0; j < 5; j++) { rm[i][j] = 1; rmr[i][j] = 0; }
    OK(MPI_Allreduce(&rm[0][0], &rmr[0][0], 1, col, MPI_SUM, w));
    for (int i = 0; i < 4; i++) CHECK(rmr[i][0] == size && rmr[i][1] == 0);

    /* hvector, hindexed, indexed_block, dup, true extent. */
    MPI_Datatype hv, hi, ib, dup;
    OK(MPI_Type_create_hvector(2, 1, 16, MPI_INT, &hv));
    int hbl[2] = {1, 1};
    MPI_Aint hdp[2] = {0, 12};
    OK(MPI_Type_create_hindexed(2, hbl, hdp, MPI_INT, &hi));
    int ibd[2] = {1, 3};
    OK(MPI_Type_create_indexed_block(2, 1, ibd, MPI_INT, &ib));
    OK(MPI_Type_dup(ib, &dup));
    MPI_Aint tlb, text;
    OK(MPI_Type_get_true_extent(ib, &tlb, &text)); CHECK(tlb == 4 && text == 12);
    OK(MPI_Type_get_extent(hv, &lb, &ext)); CHECK(ext == 20);
    OK(MPI_Type_get_envelope(dup, &ni, &na, &nd, &comb)); CHECK(comb == MPI_COMBINER_DUP);
    MPI_Aint a0, a1;
    OK(MPI_Get_address(&recs[0], &a0));
    OK(MPI_Get_address(&recs[1], &a1));
    CHECK(a1 - a0 == (MPI_Aint)sizeof(rec));

    MPI_Datatype frees[] = {col, three, idx, rt, rrt, hv, hi, ib, dup};
    for (unsigned i = 0; i < sizeof frees / sizeof frees[0]; i++) {
        OK(MPI_Type_free(&frees[i]));
        CHECK(frees[i] == MPI_DATATYPE_NULL);
    }
    OK(MPI_Finalize());
    if (rank == 0) printf("types ok on %d ranks\n", size);
    return 0;
}
