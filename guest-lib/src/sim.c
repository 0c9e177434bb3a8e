/* SPDX-License-Identifier: LGPL-2.1-only */
/*
 * libbusprof "sim" backend: hypercalls and port I/O go to the simulated
 * hypervisor over its socket.  Each thread that does port I/O gets its own
 * connection, which the simulator treats as one vCPU; the thread gives it
 * back when it exits.  The SIGSEGV trap and the simulator's address are
 * the process's, shared by all its handles and kept while one is open.
 */
#define _GNU_SOURCE /* gettid */
#include "bp_private.h"
#include "mmio_trap.h"
#include "pio_trap.h"

#include <busprof.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sim-proto.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static struct sockaddr_un sim_addr;
static uint16_t sim_domid;
static __thread int vcpu_fd = -1;
/* The thread's id, sent with each access (0: not asked yet); forgotten in
 * a child of fork(), whose thread has its own. */
static __thread uint32_t vcpu_tid;

/* Open handles; the trap and sim_addr are set up by the first. */
static pthread_mutex_t sim_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned int sim_handles;

/* Its destructor gives an exiting thread's vCPU back. */
static pthread_key_t vcpu_key;
static pthread_once_t vcpu_key_once = PTHREAD_ONCE_INIT;
static int vcpu_key_rc;

/* Async-signal-safe: used from the SIGSEGV handler as well. */
static int sim_connect(void)
{
    struct bp_sim_msg m;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    int saved;

    if ( fd < 0 )
        return -1;
    if ( connect(fd, (struct sockaddr *)&sim_addr, sizeof(sim_addr)) < 0 )
        goto fail;

    memset(&m, 0, sizeof(m));
    m.type = BP_SIM_HELLO;
    m.version = BP_SIM_VERSION;
    m.role = BP_SIM_ROLE_GUEST;
    m.domid = sim_domid;
    if ( send(fd, &m, sizeof(m), MSG_NOSIGNAL) != sizeof(m) ||
         recv(fd, &m, sizeof(m), 0) != sizeof(m) )
    {
        errno = ECONNRESET;
        goto fail;
    }
    if ( m.rc < 0 )
    {
        errno = -m.rc;
        goto fail;
    }

    return fd;

 fail:
    saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

/*
 * Give this thread's vCPU back.  The simulator frees the vCPU before it
 * closes its end, so waiting for that close means a thread started next
 * finds the vCPU free (the simulator has a fixed number per domain).
 */
static void vcpu_disconnect(void)
{
    int fd = vcpu_fd;
    char c;

    if ( fd < 0 )
        return;
    vcpu_fd = -1;
    if ( shutdown(fd, SHUT_WR) == 0 )
    {
        struct pollfd p = { .fd = fd, .events = POLLIN };

        while ( poll(&p, 1, 1000) > 0 && recv(fd, &c, 1, 0) > 0 )
            continue;
    }
    close(fd);
}

static void vcpu_key_destroy(void *unused)
{
    vcpu_disconnect();
}

static void forget_tid(void)
{
    vcpu_tid = 0;
}

static void vcpu_key_create(void)
{
    vcpu_key_rc = pthread_key_create(&vcpu_key, vcpu_key_destroy);
    if ( vcpu_key_rc == 0 )
        vcpu_key_rc = pthread_atfork(NULL, NULL, forget_tid);
}

/*
 * Also called from the SIGSEGV handler, on a thread's first trapped access.
 * pthread_setspecific() is not async-signal-safe by POSIX, but glibc's
 * does not allocate for the first keys, and this key is created by
 * bp_open() before any handler runs.
 */
static int thread_fd(void)
{
    if ( vcpu_fd < 0 )
    {
        vcpu_fd = sim_connect();
        if ( vcpu_fd >= 0 )
            pthread_setspecific(vcpu_key, (void *)(uintptr_t)1);
    }
    return vcpu_fd;
}

/* Send m (plus payload) and wait for the reply into m (plus reply payload). */
static long sim_call(struct bp_sim_msg *m, const void *payload, size_t plen,
                     void *rpayload, size_t rcap, size_t *rlen)
{
    struct iovec iov[2] = {
        { m, sizeof(*m) }, { (void *)payload, plen },
    };
    struct msghdr mh;
    ssize_t n;
    int fd = thread_fd();

    if ( fd < 0 )
        return -errno;

    /*
     * A port access carries no payload either way: plain send() and recv()
     * spare the kernel the message header on the hottest path.
     */
    if ( !plen && !rcap )
    {
        if ( send(fd, m, sizeof(*m), MSG_NOSIGNAL) < 0 )
            return -errno;
        n = recv(fd, m, sizeof(*m), 0);
        if ( n < (ssize_t)sizeof(*m) )
            return n < 0 ? -errno : -ECONNRESET;
        if ( rlen )
            *rlen = 0;
        return 0;
    }

    memset(&mh, 0, sizeof(mh));
    mh.msg_iov = iov;
    mh.msg_iovlen = plen ? 2 : 1;
    if ( sendmsg(fd, &mh, MSG_NOSIGNAL) < 0 )
        return -errno;

    iov[1].iov_base = rpayload;
    iov[1].iov_len = rcap;
    mh.msg_iovlen = rcap ? 2 : 1;
    n = recvmsg(fd, &mh, 0);
    if ( n < (ssize_t)sizeof(*m) )
        return n < 0 ? -errno : -ECONNRESET;
    if ( rlen )
        *rlen = n - sizeof(*m);

    return 0;
}

/* A guest's access (PIO or MMIO) sent as this thread's vCPU; the reply in
 * m.  0 or a negative errno value. */
static int sim_access(struct bp_sim_msg *m)
{
    long rc;

    if ( !vcpu_tid )
        vcpu_tid = (uint32_t)gettid();
    m->nr = vcpu_tid; /* the task that made it, as Xen's CR3 */

    rc = sim_call(m, NULL, 0, NULL, 0, NULL);
    if ( rc < 0 )
        return (int)rc;

    return m->rc < 0 ? m->rc : 0;
}

static int sim_forward(void *ctx, struct bp_pio *pio)
{
    struct bp_sim_msg m;
    long rc;

    (void)ctx;
    memset(&m, 0, sizeof(m));
    m.type = BP_SIM_PIO;
    m.version = BP_SIM_VERSION;
    m.port = pio->port;
    m.size = pio->size;
    m.dir = pio->is_write ? XEN_BUSPROF_DIR_OUT : XEN_BUSPROF_DIR_IN;
    m.value = pio->value;
    m.rip = pio->rip;

    rc = sim_access(&m);
    if ( rc < 0 )
        return (int)rc;
    pio->value = m.value;

    return 0;
}

/* A load or store of the device memory window: BP_SIM_MMIO, the
 * simulator's "VM exit" for an access to a page of device memory. */
static int sim_forward_mmio(void *ctx, struct bp_mmio *io)
{
    struct bp_sim_msg m;
    struct bp_sim_mmio a = { io->addr, io->value };
    long rc;

    (void)ctx;
    memset(&m, 0, sizeof(m));
    m.type = BP_SIM_MMIO;
    m.version = BP_SIM_VERSION;
    m.size = io->size;
    m.dir = io->is_write ? XEN_BUSPROF_DIR_OUT : XEN_BUSPROF_DIR_IN;
    m.rip = io->rip;
    memcpy(m.arg, &a, sizeof(a));

    rc = sim_access(&m);
    if ( rc < 0 )
        return (int)rc;
    memcpy(&a, m.arg, sizeof(a));
    io->value = a.value;

    return 0;
}

/* The simulated machine's device memory reached through a window the
 * trap engine serves (mmio_trap.h): every access is a BP_SIM_MMIO. */
static void *sim_map_mmio(struct bp_handle *h, uint64_t gpa, size_t len)
{
    (void)h;
    return bp_mmio_map(gpa, len, sim_forward_mmio, NULL);
}

static int sim_unmap_mmio(struct bp_handle *h, void *p, size_t len)
{
    (void)h;
    return bp_mmio_unmap(p, len);
}

/* The simulator's socket for this process's domain.  sim_lock held. */
static int sim_configure(void)
{
    const char *path = getenv("BUSPROF_SIM_SOCKET");
    const char *domid = getenv("BUSPROF_SIM_DOMID");
    char *end;
    unsigned long id = 1;
    int n;

    if ( !path )
    {
        errno = ENOENT;
        return -1;
    }
    if ( domid )
    {
        id = strtoul(domid, &end, 0);
        if ( *end || id == 0 || id > 0x7fef )
        {
            errno = EINVAL;
            return -1;
        }
    }

    /*
     * The simulator binds a guest to the domain of the socket it connects
     * to (PATH.dom<DOMID>, see sim-proto.h); the HELLO repeats it only to
     * catch a mix-up.
     */
    memset(&sim_addr, 0, sizeof(sim_addr));
    sim_addr.sun_family = AF_UNIX;
    n = snprintf(sim_addr.sun_path, sizeof(sim_addr.sun_path), "%s.dom%lu",
                 path, id);
    if ( n < 0 || (size_t)n >= sizeof(sim_addr.sun_path) )
    {
        errno = ENAMETOOLONG;
        return -1;
    }
    sim_domid = (uint16_t)id;

    return 0;
}

static int sim_open(struct bp_handle *h)
{
    int rc = -1, saved;

    pthread_once(&vcpu_key_once, vcpu_key_create);
    if ( vcpu_key_rc )
    {
        errno = vcpu_key_rc;
        return -1;
    }

    pthread_mutex_lock(&sim_lock);
    if ( !sim_handles && sim_configure() < 0 )
        goto out;
    if ( thread_fd() < 0 )
        goto out;
    if ( !sim_handles && bp_pio_trap_install(sim_forward, NULL) < 0 )
    {
        saved = errno;
        vcpu_disconnect();
        errno = saved;
        goto out;
    }
    sim_handles++;
    h->fd = vcpu_fd;
    rc = 0;

 out:
    pthread_mutex_unlock(&sim_lock);
    return rc;
}

/*
 * Only the last handle takes the trap away: until then another handle's
 * accesses still need it.  Other threads keep their vCPUs until they exit.
 */
static void sim_close(struct bp_handle *h)
{
    pthread_mutex_lock(&sim_lock);
    if ( sim_handles && --sim_handles == 0 )
    {
        bp_pio_trap_uninstall();
        vcpu_disconnect();
    }
    pthread_mutex_unlock(&sim_lock);
    h->fd = -1;
}

static long sim_op(struct bp_handle *h, unsigned int cmd, void *arg,
                   size_t argsize)
{
    struct bp_sim_msg m;
    struct xen_busprof_extract *x = NULL;
    struct xen_busprof_extract_wide *w = NULL;
    void *buf = NULL;
    size_t nr = 0;
    size_t rlen = 0, rec_size = sizeof(struct xen_busprof_record);
    long rc;

    (void)h;
    if ( argsize > sizeof(m.arg) )
        return -EINVAL;

    memset(&m, 0, sizeof(m));
    m.type = BP_SIM_HYPERCALL;
    m.version = BP_SIM_VERSION;
    m.cmd = cmd;
    if ( argsize ) /* pause and resume have no argument */
        memcpy(m.arg, arg, argsize);

    /* The two extracts differ in the buffer's type only. */
    if ( cmd == XEN_BUSPROF_extract || cmd == XEN_BUSPROF_extract_ext )
    {
        x = arg;
        buf = x->buffer.p;
        nr = x->nr;
        if ( cmd == XEN_BUSPROF_extract_ext )
            rec_size = sizeof(struct xen_busprof_record_ext);
    }
    else if ( cmd == XEN_BUSPROF_extract_wide )
    {
        w = arg;
        buf = w->buffer.p;
        nr = w->nr;
        rec_size = sizeof(struct xen_busprof_record_wide);
    }

    rc = sim_call(&m, NULL, 0, buf, nr * rec_size, &rlen);
    if ( rc < 0 )
        return rc;

    if ( m.rc == 0 )
    {
        if ( argsize )
            memcpy(arg, m.arg, argsize);
        /* The handle is ours, not the simulator's copy of it. */
        if ( x )
            x->buffer.p = buf;
        if ( w )
            w->buffer.p = buf;
        if ( (x && rlen != x->nr * rec_size) || (w && rlen != w->nr * rec_size) )
            return -EPROTO;
    }

    return m.rc;
}

const struct bp_backend_ops bp_sim_ops = {
    .name = "sim",
    .open = sim_open,
    .close = sim_close,
    .op = sim_op,
    .map_mmio = sim_map_mmio,
    .unmap_mmio = sim_unmap_mmio,
};
