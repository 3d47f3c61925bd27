/* Point-to-point and requests: every blocking and non-blocking send mode, probes, the
 * Test/Wait family, Cancel, Request_free, PROC_NULL and ANY_SOURCE. Any rank count >= 2. */
#include "check.h"
#include <string.h>

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size >= 2);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Status st;

    /* Ring with every blocking mode: even ranks send first. */
    for (int mode = 0; mode < 3; mode++) {
        int out = rank * 10 + mode, in = -1;
        for (int phase = 0; phase < 2; phase++) {
            if ((rank % 2) == phase) {
                if (mode == 0) OK(MPI_Send(&out, 1, MPI_INT, right, mode, MPI_COMM_WORLD));
                if (mode == 1) OK(MPI_Ssend(&out, 1, MPI_INT, right, mode, MPI_COMM_WORLD));
                if (mode == 2) OK(MPI_Send(&out, 1, MPI_INT, right, mode, MPI_COMM_WORLD));
            } else {
                OK(MPI_Recv(&in, 1, MPI_INT, left, mode, MPI_COMM_WORLD, &st));
                CHECK(in == left * 10 + mode);
                CHECK(st.MPI_SOURCE == left && st.MPI_TAG == mode);
                int n;
                OK(MPI_Get_count(&st, MPI_INT, &n));
                CHECK(n == 1);
                OK(MPI_Get_count(&st, MPI_BYTE, &n));
                CHECK(n == 4);
            }
        }
        OK(MPI_Barrier(MPI_COMM_WORLD));
    }

    /* Ready mode: the receive is posted (and a barrier passed) before the Rsend. */
    {
        int in = -1, out = rank;
        MPI_Request rr;
        OK(MPI_Irecv(&in, 1, MPI_INT, left, 5, MPI_COMM_WORLD, &rr));
        OK(MPI_Barrier(MPI_COMM_WORLD));
        OK(MPI_Rsend(&out, 1, MPI_INT, right, 5, MPI_COMM_WORLD));
        OK(MPI_Wait(&rr, MPI_STATUS_IGNORE));
        CHECK(in == left);
    }

    /* Non-blocking exchange with both neighbours, completed with Waitall. */
    double sbuf[2] = {rank + 0.5, rank + 0.25}, rbuf[2] = {0, 0};
    MPI_Request rq[4];
    OK(MPI_Irecv(&rbuf[0], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &rq[0]));
    OK(MPI_Irecv(&rbuf[1], 1, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &rq[1]));
    OK(MPI_Isend(&sbuf[0], 1, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &rq[2]));
    OK(MPI_Issend(&sbuf[1], 1, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, &rq[3]));
    MPI_Status sts[4];
    OK(MPI_Waitall(4, rq, sts));
    for (int i = 0; i < 4; i++) CHECK(rq[i] == MPI_REQUEST_NULL);
    CHECK(rbuf[0] == left + 0.5 && rbuf[1] == right + 0.25);
    CHECK(sts[0].MPI_SOURCE == left && sts[1].MPI_SOURCE == right);

    /* Testall / Testany / Testsome / Waitany / Waitsome until everything is done. */
    int vals[3] = {0, 0, 0}, mine = rank;
    for (int round = 0; round < 4; round++) {
        MPI_Request r[3];
        OK(MPI_Irecv(&vals[0], 1, MPI_INT, left, 10, MPI_COMM_WORLD, &r[0]));
        OK(MPI_Irecv(&vals[1], 1, MPI_INT, right, 11, MPI_COMM_WORLD, &r[1]));
        /* a zero-count send to myself on MPI_COMM_SELF, received below */
        OK(MPI_Isend(&mine, 0, MPI_INT, 0, 99, MPI_COMM_SELF, &r[2]));
        int z;
        OK(MPI_Recv(&z, 0, MPI_INT, 0, 99, MPI_COMM_SELF, &st));
        OK(MPI_Send(&mine, 1, MPI_INT, right, 10, MPI_COMM_WORLD));
        OK(MPI_Send(&mine, 1, MPI_INT, left, 11, MPI_COMM_WORLD));
        int done = 0, flag, idx, outc, idxs[3];
        while (done < 3) {
            switch (round) {
            case 0:
                OK(MPI_Testall(3, r, &flag, MPI_STATUSES_IGNORE));
                if (flag) done = 3;
                break;
            case 1:
                OK(MPI_Testany(3, r, &idx, &flag, &st));
                if (flag && idx != MPI_UNDEFINED) done++;
                if (flag && idx == MPI_UNDEFINED) CHECK(done == 3);
                break;
            case 2:
                OK(MPI_Testsome(3, r, &outc, idxs, MPI_STATUSES_IGNORE));
                CHECK(outc != MPI_UNDEFINED);
                done += outc;
                break;
            default:
                if (done % 2) {
                    OK(MPI_Waitany(3, r, &idx, &st));
                    CHECK(idx >= 0 && idx < 3);
                    done++;
                } else {
                    OK(MPI_Waitsome(3, r, &outc, idxs, sts));
                    CHECK(outc >= 1);
                    done += outc;
                }
            }
        }
        CHECK(vals[0] == left && vals[1] == right);
        OK(MPI_Waitany(3, r, &idx, &st));
        CHECK(idx == MPI_UNDEFINED);
        OK(MPI_Testsome(3, r, &outc, idxs, MPI_STATUSES_IGNORE));
        CHECK(outc == MPI_UNDEFINED);
        vals[0] = vals[1] = -1;
    }

    /* Sendrecv and Sendrecv_replace around the ring. */
    int a = rank, b = -1;
    OK(MPI_Sendrecv(&a, 1, MPI_INT, right, 20, &b, 1, MPI_INT, left, 20, MPI_COMM_WORLD, &st));
    CHECK(b == left && st.MPI_SOURCE == left);
    int c = rank * 3;
    OK(MPI_Sendrecv_replace(&c, 1, MPI_INT, right, 21, left, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(c == left * 3);

    /* PROC_NULL: completes at once with source MPI_PROC_NULL and no data. */
    int pn = 77;
    OK(MPI_Send(&pn, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
    OK(MPI_Recv(&pn, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
    CHECK(pn == 77 && st.MPI_SOURCE == MPI_PROC_NULL);

    /* Probe / Iprobe / ANY_SOURCE / ANY_TAG: everyone sends to rank 0. */
    if (rank == 0) {
        int seen = 0;
        long long sum = 0;
        for (int i = 1; i < size; i++) {
            int flag = 0;
            while (!flag) OK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
            MPI_Status pst;
            OK(MPI_Probe(st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &pst));
            CHECK(pst.MPI_SOURCE == st.MPI_SOURCE);
            int n;
            OK(MPI_Get_count(&pst, MPI_LONG_LONG, &n));
            CHECK(n == pst.MPI_SOURCE);
            long long buf[64];
            OK(MPI_Recv(buf, 64, MPI_LONG_LONG, pst.MPI_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            CHECK(st.MPI_TAG == 100 + st.MPI_SOURCE);
            for (int k = 0; k < n; k++) sum += buf[k];
            seen |= 1 << st.MPI_SOURCE;
        }
        CHECK(seen == ((1 << size) - 2));
        (void)sum;
    } else {
        long long buf[64];
        for (int k = 0; k < rank; k++) buf[k] = k;
        OK(MPI_Send(buf, rank, MPI_LONG_LONG, 0, 100 + rank, MPI_COMM_WORLD));
    }
    /* A standard send may complete before its receive (small ones do, as with MPICH's
     * eager sends): without this barrier rank size-1's tag-30 message below could be what
     * rank 0's MPI_ANY_TAG probe above finds. */
    OK(MPI_Barrier(MPI_COMM_WORLD));

    /* Cancel an unmatched receive; free a send request while active. */
    MPI_Request cr;
    int never;
    OK(MPI_Irecv(&never, 1, MPI_INT, MPI_ANY_SOURCE, 4242, MPI_COMM_WORLD, &cr));
    OK(MPI_Cancel(&cr));
    OK(MPI_Wait(&cr, &st));
    int cancelled = 0;
    OK(MPI_Test_cancelled(&st, &cancelled));
    CHECK(cancelled);
    MPI_Request fr;
    int gift = rank;
    OK(MPI_Isend(&gift, 1, MPI_INT, right, 30, MPI_COMM_WORLD, &fr));
    OK(MPI_Request_free(&fr));
    CHECK(fr == MPI_REQUEST_NULL);
    int got;
    OK(MPI_Recv(&got, 1, MPI_INT, left, 30, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(got == left);

    /* Buffered sends with an attached buffer. */
    int bsize = 4 * (sizeof(int) + MPI_BSEND_OVERHEAD);
    void *bbuf = malloc(bsize);
    OK(MPI_Buffer_attach(bbuf, bsize));
    for (int i = 0; i < 3; i++) {
        int v = rank * 100 + i;
        OK(MPI_Bsend(&v, 1, MPI_INT, right, 40 + i, MPI_COMM_WORLD));
    }
    for (int i = 0; i < 3; i++) {
        int v;
        OK(MPI_Recv(&v, 1, MPI_INT, left, 40 + i, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(v == left * 100 + i);
    }
    void *back;
    int bsz;
    OK(MPI_Buffer_detach(&back, &bsz));
    CHECK(back == bbuf && bsz == bsize);
    free(bbuf);

    /* Wait and Test on MPI_REQUEST_NULL. */
    MPI_Request nr = MPI_REQUEST_NULL;
    int flag = 0;
    OK(MPI_Wait(&nr, &st));
    OK(MPI_Test(&nr, &flag, &st));
    CHECK(flag);
    /* Test polling until completion. */
    int t_in = -1, t_out = rank;
    MPI_Request tr;
    OK(MPI_Irecv(&t_in, 1, MPI_INT, left, 50, MPI_COMM_WORLD, &tr));
    OK(MPI_Send(&t_out, 1, MPI_INT, right, 50, MPI_COMM_WORLD));
    flag = 0;
    while (!flag) OK(MPI_Test(&tr, &flag, &st));
    CHECK(t_in == left && tr == MPI_REQUEST_NULL);

    OK(MPI_Finalize());
    if (rank == 0) printf("p2p ok on %d ranks\n", size);
    return 0;
}
