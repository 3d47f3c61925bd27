/*
 * A stand-in for libibverbs.so.1 with one device, "fake0", compiled against the real
 * <infiniband/verbs.h>: the libibverbs provider (runtime/src/transport/verbs/ibverbs*.rs)
 * loads it with dlopen exactly as it loads rdma-core's library, so its whole FFI path runs
 * where no RDMA device exists: the exported verbs with the header's structs, the data path
 * through the context's ops table, completion channels, and the teardown order.
 *
 * It behaves like an RC loopback on one HCA: queue pairs of any context of the device
 * connect to each other by QP number; RDMA writes, writes with immediate (consuming a
 * posted receive of the peer), compare-and-swap and fetch-and-add act on the process's
 * memory after checking the rkey/lkey against registered regions; errors complete with the
 * statuses real verbs uses and put the QP in the error state (later requests are flushed).
 * ibv_modify_qp refuses a transition whose attribute mask lacks what the kernel requires.
 * Freeing an object still in use (a PD with regions, a CQ with a QP, ...) fails with EBUSY
 * and is counted: fake_ibv_errors() must be 0 after every test; fake_ibv_live() counts what
 * is not freed yet.
 *
 * Knobs: FAKE_IBV_PORT_DOWN=1 reports port 1 down; FAKE_IBV_NO_DEVICE=1 lists no device.
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#undef ibv_query_port
#undef ibv_reg_mr
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define QUEUE 4096
#define FAKE_LID 0x11
#define MAX_RD_ATOM 4

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int errors, live;
static uint32_t next_qpn = 0x40, next_key = 0x1000;

struct fake_cq {
    struct ibv_cq cq;
    struct ibv_wc wc[QUEUE];
    int head, count, armed, users;
};
struct fake_channel {
    struct ibv_comp_channel ch;
    struct fake_cq *cq;
};
struct fake_qp {
    struct ibv_qp qp;
    uint32_t dest;
    int error;
    uint64_t recvs[QUEUE];
    int rhead, rcount;
    struct fake_qp *next;
};
struct fake_mr {
    struct ibv_mr mr;
    int access;
    struct fake_mr *next;
};
struct fake_pd {
    struct ibv_pd pd;
    int users;
};
struct fake_ctx {
    struct ibv_context ctx;
    int pds;
};

static struct ibv_device dev0;
static struct fake_qp *qps;
static struct fake_mr *mrs;

int fake_ibv_errors(void) { return errors; }
int fake_ibv_live(void) { return live; }

static int busy(void) {
    errors++;
    return EBUSY;
}

struct ibv_device **ibv_get_device_list(int *num) {
    struct ibv_device **list = calloc(2, sizeof *list);
    strcpy(dev0.name, "fake0");
    strcpy(dev0.dev_name, "uverbs0");
    *num = 0;
    if (!getenv("FAKE_IBV_NO_DEVICE")) {
        list[0] = &dev0;
        *num = 1;
    }
    return list;
}

void ibv_free_device_list(struct ibv_device **list) { free(list); }

static int poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
static int req_notify_cq(struct ibv_cq *cq, int solicited_only);
static int post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
static int post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);

struct ibv_context *ibv_open_device(struct ibv_device *device) {
    struct fake_ctx *c = calloc(1, sizeof *c);
    c->ctx.device = device;
    c->ctx.ops.poll_cq = poll_cq;
    c->ctx.ops.req_notify_cq = req_notify_cq;
    c->ctx.ops.post_send = post_send;
    c->ctx.ops.post_recv = post_recv;
    pthread_mutex_lock(&lock);
    live++;
    pthread_mutex_unlock(&lock);
    return &c->ctx;
}

int ibv_close_device(struct ibv_context *context) {
    struct fake_ctx *c = (struct fake_ctx *)context;
    pthread_mutex_lock(&lock);
    int rc = c->pds ? busy() : 0;
    if (!rc) live--;
    pthread_mutex_unlock(&lock);
    if (!rc) free(c);
    return rc;
}

int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *attr) {
    (void)context;
    memset(attr, 0, sizeof *attr);
    attr->phys_port_cnt = 1;
    attr->max_qp_rd_atom = MAX_RD_ATOM;
    attr->max_qp_init_rd_atom = MAX_RD_ATOM;
    return 0;
}

int ibv_query_port(struct ibv_context *context, uint8_t port, struct _compat_ibv_port_attr *out) {
    struct ibv_port_attr *attr = (struct ibv_port_attr *)out;
    (void)context;
    if (port != 1) return EINVAL;
    attr->state = getenv("FAKE_IBV_PORT_DOWN") ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
    attr->active_mtu = IBV_MTU_4096;
    attr->max_mtu = IBV_MTU_4096;
    attr->lid = FAKE_LID;
    attr->link_layer = IBV_LINK_LAYER_INFINIBAND;
    return 0;
}

int ibv_query_gid(struct ibv_context *context, uint8_t port, int index, union ibv_gid *gid) {
    (void)context;
    if (port != 1 || index < 0 || index > 3) return EINVAL;
    memset(gid->raw, 0, 16);
    gid->raw[0] = 0xfe;
    gid->raw[1] = 0x80;
    gid->raw[15] = (uint8_t)(1 + index);
    return 0;
}

struct ibv_pd *ibv_alloc_pd(struct ibv_context *context) {
    struct fake_pd *p = calloc(1, sizeof *p);
    p->pd.context = context;
    pthread_mutex_lock(&lock);
    ((struct fake_ctx *)context)->pds++;
    live++;
    pthread_mutex_unlock(&lock);
    return &p->pd;
}

int ibv_dealloc_pd(struct ibv_pd *pd) {
    struct fake_pd *p = (struct fake_pd *)pd;
    pthread_mutex_lock(&lock);
    int rc = p->users ? busy() : 0;
    if (!rc) {
        ((struct fake_ctx *)pd->context)->pds--;
        live--;
    }
    pthread_mutex_unlock(&lock);
    if (!rc) free(p);
    return rc;
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access) {
    struct fake_mr *m = calloc(1, sizeof *m);
    m->mr.context = pd->context;
    m->mr.pd = pd;
    m->mr.addr = addr;
    m->mr.length = length;
    m->access = access;
    pthread_mutex_lock(&lock);
    m->mr.lkey = next_key++;
    m->mr.rkey = next_key++;
    m->next = mrs;
    mrs = m;
    ((struct fake_pd *)pd)->users++;
    live++;
    pthread_mutex_unlock(&lock);
    return &m->mr;
}

int ibv_dereg_mr(struct ibv_mr *mr) {
    pthread_mutex_lock(&lock);
    for (struct fake_mr **p = &mrs; *p; p = &(*p)->next) {
        if (&(*p)->mr == mr) {
            struct fake_mr *m = *p;
            *p = m->next;
            ((struct fake_pd *)mr->pd)->users--;
            live--;
            free(m);
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return 0;
}

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context) {
    struct fake_channel *c = calloc(1, sizeof *c);
    c->ch.context = context;
    c->ch.fd = eventfd(0, EFD_CLOEXEC);
    pthread_mutex_lock(&lock);
    live++;
    pthread_mutex_unlock(&lock);
    return &c->ch;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *channel) {
    struct fake_channel *c = (struct fake_channel *)channel;
    pthread_mutex_lock(&lock);
    int rc = c->cq ? busy() : 0;
    if (!rc) live--;
    pthread_mutex_unlock(&lock);
    if (!rc) {
        close(c->ch.fd);
        free(c);
    }
    return rc;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
                             struct ibv_comp_channel *channel, int comp_vector) {
    (void)comp_vector;
    if (cqe < 1 || cqe > QUEUE) {
        errno = EINVAL;
        return NULL;
    }
    struct fake_cq *q = calloc(1, sizeof *q);
    q->cq.context = context;
    q->cq.channel = channel;
    q->cq.cq_context = cq_context;
    q->cq.cqe = cqe;
    pthread_mutex_lock(&lock);
    if (channel) ((struct fake_channel *)channel)->cq = q;
    live++;
    pthread_mutex_unlock(&lock);
    return &q->cq;
}

int ibv_destroy_cq(struct ibv_cq *cq) {
    struct fake_cq *q = (struct fake_cq *)cq;
    pthread_mutex_lock(&lock);
    int rc = q->users ? busy() : 0;
    if (!rc) {
        if (cq->channel) ((struct fake_channel *)cq->channel)->cq = NULL;
        live--;
    }
    pthread_mutex_unlock(&lock);
    if (!rc) free(q);
    return rc;
}

int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context) {
    uint64_t v;
    if (read(channel->fd, &v, sizeof v) != (ssize_t)sizeof v) return -1;
    struct fake_cq *q = ((struct fake_channel *)channel)->cq;
    *cq = &q->cq;
    *cq_context = q->cq.cq_context;
    return 0;
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents) { (void)cq, (void)nevents; }

/* Called with the lock held. */
static void push_wc(struct ibv_cq *cq, struct ibv_wc wc) {
    struct fake_cq *q = (struct fake_cq *)cq;
    if (q->count == QUEUE) {
        errors++; /* CQ overrun */
        return;
    }
    q->wc[(q->head + q->count) % QUEUE] = wc;
    q->count++;
    if (q->armed && cq->channel) {
        uint64_t one = 1;
        q->armed = 0;
        if (write(cq->channel->fd, &one, sizeof one) != (ssize_t)sizeof one) errors++;
    }
}

static int poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc) {
    struct fake_cq *q = (struct fake_cq *)cq;
    int i = 0;
    pthread_mutex_lock(&lock);
    for (; i < n && q->count > 0; i++) {
        wc[i] = q->wc[q->head];
        q->head = (q->head + 1) % QUEUE;
        q->count--;
    }
    pthread_mutex_unlock(&lock);
    return i;
}

static int req_notify_cq(struct ibv_cq *cq, int solicited_only) {
    (void)solicited_only;
    pthread_mutex_lock(&lock);
    ((struct fake_cq *)cq)->armed = 1;
    pthread_mutex_unlock(&lock);
    return 0;
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init) {
    if (init->qp_type != IBV_QPT_RC || !init->send_cq || !init->recv_cq ||
        init->cap.max_send_wr > QUEUE || init->cap.max_recv_wr > QUEUE) {
        errno = EINVAL;
        return NULL;
    }
    struct fake_qp *q = calloc(1, sizeof *q);
    q->qp.context = pd->context;
    q->qp.pd = pd;
    q->qp.send_cq = init->send_cq;
    q->qp.recv_cq = init->recv_cq;
    q->qp.qp_type = IBV_QPT_RC;
    q->qp.state = IBV_QPS_RESET;
    pthread_mutex_lock(&lock);
    q->qp.qp_num = next_qpn++;
    q->next = qps;
    qps = q;
    ((struct fake_pd *)pd)->users++;
    ((struct fake_cq *)init->send_cq)->users++;
    ((struct fake_cq *)init->recv_cq)->users++;
    live++;
    pthread_mutex_unlock(&lock);
    return &q->qp;
}

int ibv_destroy_qp(struct ibv_qp *qp) {
    pthread_mutex_lock(&lock);
    for (struct fake_qp **p = &qps; *p; p = &(*p)->next) {
        if (&(*p)->qp == qp) {
            struct fake_qp *q = *p;
            *p = q->next;
            ((struct fake_pd *)qp->pd)->users--;
            ((struct fake_cq *)qp->send_cq)->users--;
            ((struct fake_cq *)qp->recv_cq)->users--;
            live--;
            free(q);
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return 0;
}

/* The attribute masks the kernel requires for each RC transition (ib_modify_qp_is_ok). */
int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask) {
    const int init = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    const int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    const int rts = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                    IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    struct fake_qp *q = (struct fake_qp *)qp;
    int ok = 0;
    if (!(mask & IBV_QP_STATE)) return EINVAL;
    switch (attr->qp_state) {
    case IBV_QPS_INIT:
        ok = qp->state == IBV_QPS_RESET && (mask & init) == init && attr->port_num == 1 &&
             attr->pkey_index == 0;
        break;
    case IBV_QPS_RTR:
        ok = qp->state == IBV_QPS_INIT && (mask & rtr) == rtr &&
             attr->path_mtu >= IBV_MTU_256 && attr->path_mtu <= IBV_MTU_4096 &&
             attr->max_dest_rd_atomic <= MAX_RD_ATOM && attr->ah_attr.port_num == 1 &&
             (attr->ah_attr.is_global || attr->ah_attr.dlid == FAKE_LID) &&
             attr->rq_psn < (1u << 24);
        if (ok) q->dest = attr->dest_qp_num;
        break;
    case IBV_QPS_RTS:
        ok = qp->state == IBV_QPS_RTR && (mask & rts) == rts &&
             attr->max_rd_atomic <= MAX_RD_ATOM && attr->sq_psn < (1u << 24) &&
             attr->retry_cnt <= 7 && attr->rnr_retry <= 7;
        break;
    default:
        break;
    }
    if (!ok) return EINVAL;
    pthread_mutex_lock(&lock);
    qp->state = attr->qp_state;
    pthread_mutex_unlock(&lock);
    return 0;
}

/* Called with the lock held. */
static struct fake_mr *find_mr(uint64_t addr, uint64_t len, uint32_t key, int remote, int need) {
    for (struct fake_mr *m = mrs; m; m = m->next) {
        uint64_t base = (uintptr_t)m->mr.addr;
        if ((remote ? m->mr.rkey : m->mr.lkey) == key && addr >= base &&
            addr + len <= base + m->mr.length && (m->access & need) == need)
            return m;
    }
    return NULL;
}

static struct fake_qp *find_qp(uint32_t num) {
    for (struct fake_qp *q = qps; q; q = q->next)
        if (q->qp.qp_num == num) return q;
    return NULL;
}

/* Executes one send work request; returns its completion status. Lock held. */
static enum ibv_wc_status execute(struct fake_qp *q, struct ibv_send_wr *wr) {
    int atomic = wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
                 wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
    uint64_t len = wr->num_sge ? wr->sg_list[0].length : 0;
    uint64_t laddr = wr->num_sge ? wr->sg_list[0].addr : 0;
    if (wr->num_sge > 1 || (atomic && len != 8)) return IBV_WC_LOC_LEN_ERR;
    if (len && !find_mr(laddr, len, wr->sg_list[0].lkey, 0, IBV_ACCESS_LOCAL_WRITE))
        return IBV_WC_LOC_PROT_ERR;
    struct fake_qp *peer = find_qp(q->dest);
    if (!peer || peer->qp.state < IBV_QPS_RTR) return IBV_WC_RETRY_EXC_ERR;
    uint64_t raddr = atomic ? wr->wr.atomic.remote_addr : wr->wr.rdma.remote_addr;
    uint32_t rkey = atomic ? wr->wr.atomic.rkey : wr->wr.rdma.rkey;
    int need = atomic ? IBV_ACCESS_REMOTE_ATOMIC : IBV_ACCESS_REMOTE_WRITE;
    if ((len || atomic) && !find_mr(raddr, atomic ? 8 : len, rkey, 1, need))
        return IBV_WC_REM_ACCESS_ERR;
    uint64_t *word = (uint64_t *)(uintptr_t)raddr, *result = (uint64_t *)(uintptr_t)laddr;
    switch (wr->opcode) {
    case IBV_WR_RDMA_WRITE:
        memcpy((void *)(uintptr_t)raddr, (void *)(uintptr_t)laddr, len);
        return IBV_WC_SUCCESS;
    case IBV_WR_RDMA_WRITE_WITH_IMM: {
        if (peer->rcount == 0) return IBV_WC_RNR_RETRY_EXC_ERR;
        if (len) memcpy((void *)(uintptr_t)raddr, (void *)(uintptr_t)laddr, len);
        struct ibv_wc wc = {0};
        wc.wr_id = peer->recvs[peer->rhead];
        peer->rhead = (peer->rhead + 1) % QUEUE;
        peer->rcount--;
        wc.status = IBV_WC_SUCCESS;
        wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
        wc.byte_len = (uint32_t)len;
        wc.imm_data = wr->imm_data;
        wc.qp_num = peer->qp.qp_num;
        wc.src_qp = q->qp.qp_num;
        wc.wc_flags = IBV_WC_WITH_IMM;
        push_wc(peer->qp.recv_cq, wc);
        return IBV_WC_SUCCESS;
    }
    case IBV_WR_ATOMIC_CMP_AND_SWP:
        *result = *word;
        if (*word == wr->wr.atomic.compare_add) *word = wr->wr.atomic.swap;
        return IBV_WC_SUCCESS;
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
        *result = *word;
        *word += wr->wr.atomic.compare_add;
        return IBV_WC_SUCCESS;
    default:
        return IBV_WC_LOC_QP_OP_ERR;
    }
}

static int post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
    struct fake_qp *q = (struct fake_qp *)qp;
    pthread_mutex_lock(&lock);
    for (; wr; wr = wr->next) {
        if (qp->state != IBV_QPS_RTS && !q->error) {
            *bad = wr;
            pthread_mutex_unlock(&lock);
            return EINVAL;
        }
        enum ibv_wc_status status = q->error ? IBV_WC_WR_FLUSH_ERR : execute(q, wr);
        if (status != IBV_WC_SUCCESS) q->error = 1;
        if (status != IBV_WC_SUCCESS || (wr->send_flags & IBV_SEND_SIGNALED)) {
            struct ibv_wc wc = {0};
            wc.wr_id = wr->wr_id;
            wc.status = status;
            wc.qp_num = qp->qp_num;
            wc.opcode = wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP     ? IBV_WC_COMP_SWAP
                        : wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ? IBV_WC_FETCH_ADD
                                                                    : IBV_WC_RDMA_WRITE;
            /* As real verbs: an error completion's opcode is undefined. */
            if (status != IBV_WC_SUCCESS) wc.opcode = 0x7f;
            push_wc(qp->send_cq, wc);
        }
    }
    pthread_mutex_unlock(&lock);
    return 0;
}

static int post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
    struct fake_qp *q = (struct fake_qp *)qp;
    pthread_mutex_lock(&lock);
    for (; wr; wr = wr->next) {
        if (q->rcount == QUEUE || qp->state == IBV_QPS_RESET) {
            *bad = wr;
            pthread_mutex_unlock(&lock);
            return ENOMEM;
        }
        q->recvs[(q->rhead + q->rcount) % QUEUE] = wr->wr_id;
        q->rcount++;
    }
    pthread_mutex_unlock(&lock);
    return 0;
}
