/* Environment, communicators, groups, names, keyvals and attributes, error handlers.
 * Any rank count >= 2. */
#include "check.h"
#include <string.h>

static int copies, deletes;
static int copy_fn(MPI_Comm c, int k, void *extra, void *in, void *out, int *flag) {
    (void)c; (void)k; (void)extra;
    copies++;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}
static int delete_fn(MPI_Comm c, int k, void *val, void *extra) {
    (void)c; (void)k; (void)val;
    CHECK(extra == (void *)&deletes);
    deletes++;
    return MPI_SUCCESS;
}

int main(int argc, char **argv) {
    int flag = -1, provided = -1;
    OK(MPI_Initialized(&flag)); CHECK(flag == 0);
    OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    CHECK(provided == MPI_THREAD_FUNNELED);
    OK(MPI_Query_thread(&provided)); CHECK(provided == MPI_THREAD_FUNNELED);
    OK(MPI_Is_thread_main(&flag)); CHECK(flag == 1);
    OK(MPI_Initialized(&flag)); CHECK(flag == 1);
    int rank, size;
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));

    int ver, sub, len;
    OK(MPI_Get_version(&ver, &sub)); CHECK(ver == 3 && sub == 1);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    OK(MPI_Get_library_version(lib, &len)); CHECK(strncmp(lib, "strobe ", 7) == 0 && len == (int)strlen(lib));
    char host[MPI_MAX_PROCESSOR_NAME];
    OK(MPI_Get_processor_name(host, &len)); CHECK(len > 0 && len == (int)strlen(host));
    CHECK(MPI_Wtick() > 0 && MPI_Wtick() < 1);
    double t0 = MPI_Wtime();
    CHECK(MPI_Wtime() >= t0);
    void *mem = NULL;
    OK(MPI_Alloc_mem(1024, MPI_INFO_NULL, &mem)); CHECK(mem != NULL);
    memset(mem, 1, 1024);
    OK(MPI_Free_mem(mem));

    /* Predefined attributes. */
    int *tag_ub = NULL;
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag));
    CHECK(flag && *tag_ub >= 32767);
    int *usize;
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &usize, &flag)); CHECK(flag && *usize == size);
    OK(MPI_Attr_get(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag)); CHECK(flag);
    int *wg;
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &wg, &flag)); CHECK(flag);

    /* Names. */
    char name[MPI_MAX_OBJECT_NAME];
    OK(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len)); CHECK(strcmp(name, "MPI_COMM_WORLD") == 0);
    OK(MPI_Comm_get_name(MPI_COMM_SELF, name, &len)); CHECK(strcmp(name, "MPI_COMM_SELF") == 0);

    /* Dup with attributes, compare, set/get name. */
    int key;
    OK(MPI_Comm_create_keyval(copy_fn, delete_fn, &key, &deletes));
    int val = 42;
    OK(MPI_Comm_set_attr(MPI_COMM_WORLD, key, &val));
    int *back;
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, key, &back, &flag)); CHECK(flag && back == &val);
    MPI_Comm dup;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    CHECK(copies == 1);
    OK(MPI_Comm_get_attr(dup, key, &back, &flag)); CHECK(flag && *back == 42);
    int res;
    OK(MPI_Comm_compare(MPI_COMM_WORLD, dup, &res)); CHECK(res == MPI_CONGRUENT);
    OK(MPI_Comm_compare(dup, dup, &res)); CHECK(res == MPI_IDENT);
    OK(MPI_Comm_set_name(dup, "my dup"));
    OK(MPI_Comm_get_name(dup, name, &len)); CHECK(strcmp(name, "my dup") == 0 && len == 6);
    int dsum = 0, one = 1;
    OK(MPI_Allreduce(&one, &dsum, 1, MPI_INT, MPI_SUM, dup)); CHECK(dsum == size);
    OK(MPI_Comm_free(&dup));
    CHECK(dup == MPI_COMM_NULL && deletes == 1);
    OK(MPI_Comm_delete_attr(MPI_COMM_WORLD, key));
    CHECK(deletes == 2);
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, key, &back, &flag)); CHECK(!flag);
    OK(MPI_Comm_free_keyval(&key)); CHECK(key == MPI_KEYVAL_INVALID);

    /* Split by parity, reversed order; MPI_UNDEFINED gives MPI_COMM_NULL. */
    MPI_Comm half, none;
    OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half));
    int hr, hs;
    OK(MPI_Comm_rank(half, &hr));
    OK(MPI_Comm_size(half, &hs));
    CHECK(hs == (size + 1 - rank % 2) / 2);
    int hsum = 0;
    OK(MPI_Allreduce(&rank, &hsum, 1, MPI_INT, MPI_SUM, half));
    OK(MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? 0 : MPI_UNDEFINED, 0, &none));
    CHECK((rank == 0) == (none != MPI_COMM_NULL));
    if (none != MPI_COMM_NULL) OK(MPI_Comm_free(&none));
    OK(MPI_Comm_compare(MPI_COMM_WORLD, half, &res)); CHECK(res == MPI_UNEQUAL);

    /* Groups. */
    MPI_Group wgrp, hgrp, even, odd, rng;
    OK(MPI_Comm_group(MPI_COMM_WORLD, &wgrp));
    OK(MPI_Comm_group(half, &hgrp));
    int gs, gr;
    OK(MPI_Group_size(wgrp, &gs)); CHECK(gs == size);
    OK(MPI_Group_rank(wgrp, &gr)); CHECK(gr == rank);
    OK(MPI_Group_rank(hgrp, &gr)); CHECK(gr == hr);
    int evens[64], ne = 0;
    for (int k = 0; k < size; k += 2) evens[ne++] = k;
    OK(MPI_Group_incl(wgrp, ne, evens, &even));
    OK(MPI_Group_excl(wgrp, ne, evens, &odd));
    OK(MPI_Group_size(odd, &gs)); CHECK(gs == size - ne);
    int ranges[1][3] = {{0, size - 1, 2}};
    OK(MPI_Group_range_incl(wgrp, 1, ranges, &rng));
    OK(MPI_Group_compare(rng, even, &res)); CHECK(res == MPI_IDENT);
    OK(MPI_Group_compare(wgrp, even, &res)); CHECK(res == MPI_UNEQUAL);
    int tr_in[2] = {0, 1}, tr_out[2];
    OK(MPI_Group_translate_ranks(even, 1, tr_in, wgrp, tr_out)); CHECK(tr_out[0] == 0);
    OK(MPI_Group_translate_ranks(wgrp, 2, tr_in, even, tr_out)); CHECK(tr_out[0] == 0 && tr_out[1] == MPI_UNDEFINED);

    /* Comm_create from the even group: odd ranks get MPI_COMM_NULL. */
    MPI_Comm ec;
    OK(MPI_Comm_create(MPI_COMM_WORLD, even, &ec));
    CHECK((rank % 2 == 0) == (ec != MPI_COMM_NULL));
    if (ec != MPI_COMM_NULL) {
        int er, es;
        OK(MPI_Comm_rank(ec, &er)); OK(MPI_Comm_size(ec, &es));
        CHECK(er == rank / 2 && es == ne);
        OK(MPI_Barrier(ec));
        OK(MPI_Comm_free(&ec));
    }
    /* Comm_create_group with every member, in reverse order. */
    int rev[64];
    for (int k = 0; k < size; k++) rev[k] = size - 1 - k;
    MPI_Group rgrp;
    OK(MPI_Group_incl(wgrp, size, rev, &rgrp));
    MPI_Comm rc;
    OK(MPI_Comm_create_group(MPI_COMM_WORLD, rgrp, 7, &rc));
    int rr;
    OK(MPI_Comm_rank(rc, &rr)); CHECK(rr == size - 1 - rank);
    OK(MPI_Comm_compare(MPI_COMM_WORLD, rc, &res)); CHECK(res == MPI_SIMILAR);
    OK(MPI_Comm_free(&rc));

    /* Split by shared memory (one host: everyone), no parent, Dims_create. */
    MPI_Comm shm, parent;
    OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shm));
    int ss;
    OK(MPI_Comm_size(shm, &ss)); CHECK(ss == size);
    OK(MPI_Comm_free(&shm));
    OK(MPI_Comm_get_parent(&parent)); CHECK(parent == MPI_COMM_NULL);
    int d2[2] = {0, 0};
    OK(MPI_Dims_create(12, 2, d2)); CHECK(d2[0] == 4 && d2[1] == 3);
    int d3[3] = {0, 2, 0};
    OK(MPI_Dims_create(12, 3, d3)); CHECK(d3[0] == 3 && d3[1] == 2 && d3[2] == 2);
    int d4[2] = {0, 0};
    OK(MPI_Dims_create(7, 2, d4)); CHECK(d4[0] == 7 && d4[1] == 1);
    int d5[3] = {0, 0, 0};
    OK(MPI_Dims_create(size, 3, d5)); CHECK(d5[0] * d5[1] * d5[2] == size && d5[0] >= d5[1] && d5[1] >= d5[2]);

    /* Intercommunicators are refused clearly. */
    OK(MPI_Comm_test_inter(MPI_COMM_WORLD, &flag)); CHECK(flag == 0);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_Errhandler eh;
    OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh)); CHECK(eh == MPI_ERRORS_RETURN);
    OK(MPI_Errhandler_free(&eh)); CHECK(eh == MPI_ERRHANDLER_NULL);
    int rs;
    CHECK(MPI_Comm_remote_size(MPI_COMM_WORLD, &rs) == MPI_ERR_COMM);

    MPI_Group gl[] = {wgrp, hgrp, even, odd, rng, rgrp};
    for (unsigned i = 0; i < sizeof gl / sizeof gl[0]; i++) { OK(MPI_Group_free(&gl[i])); CHECK(gl[i] == MPI_GROUP_NULL); }
    OK(MPI_Comm_free(&half));
    OK(MPI_Finalized(&flag)); CHECK(flag == 0);
    OK(MPI_Finalize());
    OK(MPI_Finalized(&flag)); CHECK(flag == 1);
    if (rank == 0) printf("comm ok on %d ranks\n", size);
    return 0;
}
