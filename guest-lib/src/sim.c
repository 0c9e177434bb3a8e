/*
 * libbusprof "sim" backend: hypercalls and port I/O go to the simulated
 * hypervisor over its socket.  Each thread that does port I/O gets its own
 * connection, which the simulator treats as one vCPU.
 */
#include "bp_private.h"
#include "pio_trap.h"

#include <busprof.h>
#include <errno.h>
#include <sim-proto.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static struct sockaddr_un sim_addr;
static uint16_t sim_domid;
static __thread int vcpu_fd = -1;

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

static int thread_fd(void)
{
    if ( vcpu_fd < 0 )
        vcpu_fd = sim_connect();
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

    rc = sim_call(&m, NULL, 0, NULL, 0, NULL);
    if ( rc < 0 )
        return (int)rc;
    if ( m.rc < 0 )
        return m.rc;
    pio->value = m.value;

    return 0;
}

static int sim_open(struct bp_handle *h)
{
    const char *path = getenv("BUSPROF_SIM_SOCKET");
    const char *domid = getenv("BUSPROF_SIM_DOMID");
    char *end;
    unsigned long id = 1;

    if ( !path || strlen(path) >= sizeof(sim_addr.sun_path) )
    {
        errno = path ? ENAMETOOLONG : ENOENT;
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

    memset(&sim_addr, 0, sizeof(sim_addr));
    sim_addr.sun_family = AF_UNIX;
    strcpy(sim_addr.sun_path, path);
    sim_domid = (uint16_t)id;

    if ( thread_fd() < 0 )
        return -1;
    h->fd = vcpu_fd;

    return bp_pio_trap_install(sim_forward, NULL);
}

static void sim_close(struct bp_handle *h)
{
    bp_pio_trap_uninstall();
    if ( vcpu_fd >= 0 )
        close(vcpu_fd);
    vcpu_fd = -1;
    h->fd = -1;
}

static long sim_op(struct bp_handle *h, unsigned int cmd, void *arg,
                   size_t argsize)
{
    struct bp_sim_msg m;
    struct xen_busprof_extract *x = NULL;
    struct xen_busprof_record *buf = NULL;
    size_t rlen = 0;
    long rc;

    (void)h;
    if ( argsize > sizeof(m.arg) )
        return -EINVAL;

    memset(&m, 0, sizeof(m));
    m.type = BP_SIM_HYPERCALL;
    m.version = BP_SIM_VERSION;
    m.cmd = cmd;
    memcpy(m.arg, arg, argsize);

    if ( cmd == XEN_BUSPROF_extract )
    {
        x = arg;
        buf = x->buffer.p;
    }

    rc = sim_call(&m, NULL, 0, buf,
                  x ? x->nr * sizeof(struct xen_busprof_record) : 0, &rlen);
    if ( rc < 0 )
        return rc;

    if ( m.rc == 0 )
    {
        memcpy(arg, m.arg, argsize);
        /* The handle is ours, not the simulator's copy of it. */
        if ( x )
        {
            set_xen_guest_handle(x->buffer, buf);
            if ( rlen != x->nr * sizeof(struct xen_busprof_record) )
                return -EPROTO;
        }
    }

    return m.rc;
}

const struct bp_backend_ops bp_sim_ops = {
    .name = "sim",
    .open = sim_open,
    .close = sim_close,
    .op = sim_op,
};
