/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * busprof: the busprof_op hypercall, the trap decision and the control
 * protocol with the profiler.
 *
 * A guest traps its own port I/O to a range with XEN_BUSPROF_start_trap,
 * or dom0 traps it for a guest that never calls busprof (XEN_BUSPROF_trap).
 * The range must be allowed by the policy dom0 set for the domain and be
 * accessible to the domain at all, so the profiler never touches a port
 * on a guest's behalf that the guest could not touch itself.  The I/O
 * path asks busprof_route() where an access goes and sends a trapped one
 * to the profiler's ioreq server by its id (no ranges are registered with
 * the server); every trapped access is stamped here and then travels as
 * an ordinary ioreq.
 */

#include <xen/busprof.h>
#include <xen/errno.h>
#include <xen/guest_access.h>
#include <xen/lib.h>
#include <xen/xmalloc.h>

#define BUSPROF_DEFAULT_TIMEOUT_MS 1000

/*
 * The most negative status the profiler may give a guest's extract: what a
 * guest's hypercall wrapper reads as -errno (Linux's MAX_ERRNO).
 */
#define BUSPROF_MAX_ERRNO 4095

/*
 * An extract is polled: the guest repeats the call and nothing waits in
 * Xen, while the profiler answers from its trace store, which may take
 * longer than a bus access.  So its request is bounded by this many access
 * timeouts; the bound only frees the request of a profiler that does not
 * answer.
 */
#define BUSPROF_EXTRACT_TIMEOUTS 10

static struct busprof_domain *busprof_get(struct domain *d, bool create)
{
    struct busprof_domain *bd = d->busprof;

    if ( bd || !create )
        return bd;

    bd = xzalloc(struct busprof_domain);
    if ( !bd )
        return NULL;
    spin_lock_init(&bd->lock);

    /* Two dom0 calls may race to create it; keep the first. */
    if ( cmpxchg(&d->busprof, NULL, bd) != NULL )
    {
        xfree(bd);
        bd = d->busprof;
    }

    return bd;
}

/* Caller holds bd->lock. */
static void ctrl_post(struct domain *d, struct busprof_domain *bd,
                      uint32_t kind, unsigned int vcpu, unsigned int flags,
                      unsigned int first, unsigned int last, uint32_t nr,
                      uint64_t offset, uint64_t snapshot)
{
    struct xen_busprof_page *pg = bd->page;
    struct xen_busprof_ctrl_msg *m;
    uint32_t prod, cons;

    if ( !pg )
        return;

    prod = pg->ctrl_prod;
    cons = ACCESS_ONCE(pg->ctrl_cons);
    if ( prod - cons >= XEN_BUSPROF_CTRL_RING_SIZE )
    {
        pg->ctrl_lost++;
        return;
    }

    m = &pg->ring[prod % XEN_BUSPROF_CTRL_RING_SIZE];
    m->kind = kind;
    m->vcpu = vcpu;
    m->first = first;
    m->last = last;
    m->flags = flags;
    m->nr = nr;
    m->tsc = busprof_host_tsc();
    m->seq = ++bd->ctrl_seq;
    m->offset = offset;
    m->snapshot = snapshot;
    smp_wmb();
    pg->ctrl_prod = prod + 1;

    busprof_host_evtchn_notify(d, bd->ctrl_port);
}

static bool ctrl_ring_full(const struct busprof_domain *bd)
{
    const struct xen_busprof_page *pg = bd->page;

    return pg->ctrl_prod - ACCESS_ONCE(pg->ctrl_cons) >=
           XEN_BUSPROF_CTRL_RING_SIZE;
}

static void extract_reset(struct busprof_domain *bd)
{
    xfree(bd->extract.records);
    bd->extract.records = NULL;
    bd->extract.state = BUSPROF_EXTRACT_IDLE;
}

/* Caller holds bd->lock. */
static void detach_locked(struct domain *d, struct busprof_domain *bd)
{
    if ( !bd->attached )
        return;

    bd->traps.nr = 0;

    ctrl_post(d, bd, XEN_BUSPROF_CTRL_detach, 0, 0, 0, 0, 0, 0, 0);
    extract_reset(bd);

    busprof_host_evtchn_free(d, bd->ctrl_port);
    busprof_host_page_free(d, bd->page);
    bd->page = NULL;
    bd->attached = false;
}

static int check_trap(const struct xen_busprof_trap *t)
{
    if ( t->flags || t->first > t->last )
        return -EINVAL;

    return 0;
}

/*
 * Trap [t->first, t->last] of d's port I/O, for the guest itself (vcpu is
 * its caller) or for dom0 (XEN_BUSPROF_CTRL_FROM_DOM0): the same checks
 * either way, so dom0 cannot make the profiler touch a port the guest could
 * not touch itself.
 */
static int trap_add(struct domain *d, const struct xen_busprof_trap *t,
                    unsigned int vcpu, unsigned int flags)
{
    struct busprof_domain *bd = busprof_get(d, false);
    int rc = check_trap(t);

    if ( rc )
        return rc;
    if ( !bd )
        return -EPERM;

    spin_lock(&bd->lock);

    rc = -EPERM;
    if ( !busprof_ranges_covers(&bd->policy, t->first, t->last) ||
         !busprof_host_ioports_permitted(d, t->first, t->last) )
        goto out;

    rc = -ENXIO;
    if ( !bd->attached )
        goto out;

    rc = -EEXIST;
    if ( busprof_ranges_overlaps(&bd->traps, t->first, t->last) )
        goto out;

    rc = -ENOSPC;
    if ( bd->traps.nr == XEN_BUSPROF_MAX_RANGES )
        goto out;

    rc = busprof_host_server_ready(d, bd->ioservid, bd->profiler);
    if ( rc )
        goto out;

    rc = busprof_ranges_add(&bd->traps, t->first, t->last, false);
    ASSERT(!rc);
    ctrl_post(d, bd, XEN_BUSPROF_CTRL_start_trap, vcpu, flags, t->first,
              t->last, 0, 0, 0);

 out:
    spin_unlock(&bd->lock);

    return rc;
}

/* Whoever started a trap, the guest or dom0 may stop it. */
static int trap_remove(struct domain *d, const struct xen_busprof_trap *t,
                       unsigned int vcpu, unsigned int flags)
{
    struct busprof_domain *bd = busprof_get(d, false);
    int rc = check_trap(t);

    if ( rc )
        return rc;
    if ( !bd )
        return -ENOENT;

    spin_lock(&bd->lock);

    rc = busprof_ranges_remove(&bd->traps, t->first, t->last, true);
    if ( !rc )
        ctrl_post(d, bd, XEN_BUSPROF_CTRL_stop_trap, vcpu, flags, t->first,
                  t->last, 0, 0, 0);

    spin_unlock(&bd->lock);

    return rc;
}

/*
 * The guest pauses or resumes the recording.  Xen keeps no state for it:
 * the message, in the ring between the guest's accesses, is the request.
 * Refused rather than lost when the ring is full.
 */
static int pause_resume(struct vcpu *v, bool pause)
{
    struct domain *d = v->domain;
    struct busprof_domain *bd = busprof_get(d, false);
    int rc;

    if ( !bd )
        return -ENXIO;

    spin_lock(&bd->lock);
    rc = -ENXIO;
    if ( !bd->attached )
        goto out;
    rc = -EAGAIN;
    if ( ctrl_ring_full(bd) )
        goto out;
    ctrl_post(d, bd, pause ? XEN_BUSPROF_CTRL_pause : XEN_BUSPROF_CTRL_resume,
              v->vcpu_id, 0, 0, 0, 0, 0, 0);
    rc = 0;

 out:
    spin_unlock(&bd->lock);

    return rc;
}

static bool extract_matches(const struct busprof_domain *bd,
                            const struct vcpu *v,
                            const struct xen_busprof_extract *x, bool ext)
{
    return bd->extract.vcpu == v->vcpu_id && bd->extract.ext == ext &&
           bd->extract.first == x->first && bd->extract.last == x->last &&
           bd->extract.nr == x->nr && bd->extract.offset == x->offset &&
           bd->extract.snapshot == x->snapshot;
}

/*
 * Pack extended records into plain ones, in place: record i moves down from
 * offset i * sizeof(ext) to i * sizeof(plain), so nothing is overwritten
 * before it is read.  A plain record says nothing of who made the access,
 * so it does not carry XEN_BUSPROF_RECORD_WHO either.
 */
static void records_to_plain(struct xen_busprof_record_ext *ext,
                             unsigned int nr)
{
    struct xen_busprof_record *plain = (struct xen_busprof_record *)ext;
    unsigned int i;

    for ( i = 0; i < nr; i++ )
    {
        memmove(&plain[i], &ext[i].rec, sizeof(plain[i]));
        plain[i].flags &= ~XEN_BUSPROF_RECORD_WHO;
        memset(plain[i].pad, 0, sizeof(plain[i].pad));
    }
}

/*
 * The reverse, for the plain records of a profiler older than interface
 * 1.2: from the last down, so that no record is overwritten before it is
 * read.  They say nothing of who made the access.
 */
static void records_to_ext(struct xen_busprof_record_ext *ext,
                           unsigned int nr)
{
    const struct xen_busprof_record *plain =
        (const struct xen_busprof_record *)ext;
    unsigned int i;

    for ( i = nr; i-- > 0; )
    {
        memmove(&ext[i].rec, &plain[i], sizeof(ext[i].rec));
        ext[i].rec.flags &= ~XEN_BUSPROF_RECORD_WHO;
        ext[i].task = 0;
        ext[i].pcpu = 0;
        ext[i].pad = 0;
    }
}

/*
 * XEN_BUSPROF_extract (ext false) and XEN_BUSPROF_extract_ext (ext true):
 * their arguments differ only in the type of buffer.
 */
static int extract(struct vcpu *v, XEN_GUEST_HANDLE_PARAM(void) arg,
                   bool ext)
{
    struct domain *d = v->domain;
    struct busprof_domain *bd = busprof_get(d, false);
    /* One buffer, read as either argument. */
    union {
        struct xen_busprof_extract plain;
        struct xen_busprof_extract_ext ext;
    } u;
    struct xen_busprof_extract *x = &u.plain;
    struct xen_busprof_record_ext *records = NULL;
    bool answered = false;
    s_time_t timeout;
    int rc;

    BUILD_BUG_ON(sizeof(struct xen_busprof_extract) !=
                 sizeof(struct xen_busprof_extract_ext));

    if ( copy_from_guest(x, arg, 1) )
        return -EFAULT;

    if ( x->first > x->last || x->nr > XEN_BUSPROF_EXTRACT_MAX )
        return -EINVAL;
    if ( !bd )
        return -ENXIO;

    spin_lock(&bd->lock);

    rc = -ENXIO;
    if ( !bd->attached )
        goto out;

    timeout = MILLISECS(bd->timeout_ms) * BUSPROF_EXTRACT_TIMEOUTS;

    if ( bd->extract.state != BUSPROF_EXTRACT_IDLE &&
         !extract_matches(bd, v, x, ext) )
    {
        /* Someone else's request; take over one its owner abandoned. */
        rc = -EBUSY;
        if ( NOW() - bd->extract.posted < 2 * timeout )
            goto out;
        extract_reset(bd);
    }

    switch ( bd->extract.state )
    {
    case BUSPROF_EXTRACT_IDLE:
        rc = -EAGAIN;
        if ( ctrl_ring_full(bd) )
            goto out;
        ctrl_post(d, bd, XEN_BUSPROF_CTRL_extract, v->vcpu_id, 0, x->first,
                  x->last, x->nr, x->offset, x->snapshot);
        bd->extract.state = BUSPROF_EXTRACT_POSTED;
        bd->extract.seq = bd->ctrl_seq;
        bd->extract.vcpu = v->vcpu_id;
        bd->extract.ext = ext;
        bd->extract.first = x->first;
        bd->extract.last = x->last;
        bd->extract.nr = x->nr;
        bd->extract.offset = x->offset;
        bd->extract.snapshot = x->snapshot;
        bd->extract.posted = NOW();
        goto out;

    case BUSPROF_EXTRACT_POSTED:
        rc = -EAGAIN;
        if ( NOW() - bd->extract.posted >= timeout )
        {
            extract_reset(bd);
            rc = -ETIMEDOUT;
        }
        goto out;

    case BUSPROF_EXTRACT_ANSWERED:
        rc = bd->extract.status;
        x->nr = bd->extract.nr_out;
        x->total = bd->extract.total;
        x->snapshot = bd->extract.snapshot_out;
        records = bd->extract.records;
        bd->extract.records = NULL;
        bd->extract.state = BUSPROF_EXTRACT_IDLE;
        answered = true;
        break;
    }

 out:
    spin_unlock(&bd->lock);

    if ( answered )
    {
        if ( !rc && x->nr && ext )
        {
            if ( copy_to_guest(u.ext.buffer, records, x->nr) )
                rc = -EFAULT;
        }
        else if ( !rc && x->nr )
        {
            records_to_plain(records, x->nr);
            if ( copy_to_guest(u.plain.buffer,
                               (struct xen_busprof_record *)records, x->nr) )
                rc = -EFAULT;
        }
        xfree(records);
        if ( !rc && copy_to_guest(arg, x, 1) )
            rc = -EFAULT;
    }

    return rc;
}

static int attach(struct domain *caller, struct domain *d,
                  struct xen_busprof_attach *a)
{
    struct busprof_domain *bd;
    struct xen_busprof_page *pg;
    int rc, port;

    if ( a->pad ||
         (a->version >> 16) != (XEN_BUSPROF_INTERFACE_VERSION >> 16) )
        return -EINVAL;
    if ( d->max_vcpus > XEN_BUSPROF_MAX_VCPUS )
        return -E2BIG;

    bd = busprof_get(d, true);
    if ( !bd )
        return -ENOMEM;

    spin_lock(&bd->lock);

    rc = -EBUSY;
    if ( bd->attached )
        goto out;

    rc = -ENOMEM;
    pg = busprof_host_page_alloc(d);
    if ( !pg )
        goto out;

    port = busprof_host_evtchn_alloc(d, caller->domain_id);
    if ( port < 0 )
    {
        busprof_host_page_free(d, pg);
        rc = port;
        goto out;
    }

    pg->version = XEN_BUSPROF_INTERFACE_VERSION;
    pg->tsc_khz = busprof_host_tsc_khz();
    pg->nr_vcpus = d->max_vcpus;
    pg->flags = busprof_host_clock_flags();

    bd->page = pg;
    bd->ctrl_port = port;
    bd->nr_vcpus = d->max_vcpus;
    bd->profiler = caller->domain_id;
    bd->ioservid = a->ioservid;
    bd->timeout_ms = a->timeout_ms ?: BUSPROF_DEFAULT_TIMEOUT_MS;
    bd->attached = true;

    a->ctrl_port = port;
    a->nr_vcpus = d->max_vcpus;
    rc = 0;

 out:
    spin_unlock(&bd->lock);

    return rc;
}

static int extract_reply(struct domain *d,
                         const struct xen_busprof_extract_reply *r)
{
    struct busprof_domain *bd = busprof_get(d, false);
    struct xen_busprof_record_ext *records = NULL;
    bool ext = r->flags & XEN_BUSPROF_REPLY_EXT;
    int rc;

    if ( (r->flags & ~XEN_BUSPROF_REPLY_EXT) || r->pad1 || r->status > 0 ||
         r->status < -BUSPROF_MAX_ERRNO || r->nr > XEN_BUSPROF_EXTRACT_MAX )
        return -EINVAL;
    if ( !bd )
        return -ENOENT;

    if ( r->nr )
    {
        records = xmalloc_array(struct xen_busprof_record_ext, r->nr);
        if ( !records )
            return -ENOMEM;
        if ( ext
             ? copy_from_guest(records,
                               guest_handle_cast(r->records,
                                                 xen_busprof_record_ext_t),
                               r->nr)
             : copy_from_guest((struct xen_busprof_record *)records,
                               guest_handle_cast(r->records,
                                                 xen_busprof_record_t),
                               r->nr) )
        {
            xfree(records);
            return -EFAULT;
        }
        if ( !ext )
            records_to_ext(records, r->nr);
    }

    spin_lock(&bd->lock);

    rc = -ENOENT;
    if ( bd->extract.state != BUSPROF_EXTRACT_POSTED ||
         bd->extract.seq != r->request )
        goto out;

    rc = -EINVAL;
    if ( r->nr > bd->extract.nr )
        goto out;

    bd->extract.state = BUSPROF_EXTRACT_ANSWERED;
    bd->extract.status = r->status;
    bd->extract.nr_out = r->nr;
    bd->extract.total = r->total;
    bd->extract.snapshot_out = r->snapshot;
    bd->extract.records = records;
    records = NULL;
    rc = 0;

 out:
    spin_unlock(&bd->lock);
    xfree(records);

    return rc;
}

static int policy(struct domain *d, const struct xen_busprof_policy *p,
                  bool allow)
{
    struct busprof_domain *bd;
    unsigned int i;
    int rc;

    if ( p->pad || p->first > p->last )
        return -EINVAL;

    bd = busprof_get(d, allow);
    if ( !bd )
        return allow ? -ENOMEM : 0;

    spin_lock(&bd->lock);

    if ( allow )
        rc = busprof_ranges_add(&bd->policy, p->first, p->last, true);
    else
    {
        rc = busprof_ranges_remove(&bd->policy, p->first, p->last, false);

        /* A trap outside the new policy goes with it. */
        for ( i = 0; !rc && i < bd->traps.nr; )
        {
            struct xen_busprof_range t = bd->traps.r[i];

            if ( busprof_ranges_covers(&bd->policy, t.first, t.last) )
            {
                i++;
                continue;
            }
            busprof_ranges_remove(&bd->traps, t.first, t.last, true);
            ctrl_post(d, bd, XEN_BUSPROF_CTRL_stop_trap, 0,
                      XEN_BUSPROF_CTRL_FROM_DOM0, t.first, t.last, 0, 0, 0);
        }
    }

    spin_unlock(&bd->lock);

    return rc;
}

static void query(struct domain *d, struct xen_busprof_query *q)
{
    struct busprof_domain *bd = busprof_get(d, false);
    domid_t domid = q->domid;

    /* Every OUT field is written, also for a domain never configured. */
    memset(q, 0, sizeof(*q));
    q->domid = domid;

    q->now = busprof_host_tsc();

    if ( !bd )
        return;

    spin_lock(&bd->lock);
    q->nr_policy = bd->policy.nr;
    q->nr_traps = bd->traps.nr;
    q->attached = bd->attached;
    q->trapped = bd->trapped;
    q->timeouts = bd->timeouts;
    memcpy(q->policy, bd->policy.r, sizeof(q->policy));
    memcpy(q->traps, bd->traps.r, sizeof(q->traps));
    spin_unlock(&bd->lock);
}

/* Every dom0 sub-op's argument starts with domid_t domid. */
static long dom0_op(struct domain *caller, unsigned int cmd,
                    XEN_GUEST_HANDLE_PARAM(void) arg)
{
    union {
        domid_t domid;
        struct xen_busprof_attach attach;
        struct xen_busprof_domain domain;
        struct xen_busprof_policy policy;
        struct xen_busprof_extract_reply reply;
        struct xen_busprof_query query;
        struct xen_busprof_dom0_trap trap;
    } u;
    struct xen_busprof_trap t;
    size_t size;
    struct domain *d;
    int rc;
    bool copy_back = false;

    switch ( cmd )
    {
    case XEN_BUSPROF_attach:        size = sizeof(u.attach); break;
    case XEN_BUSPROF_detach:        size = sizeof(u.domain); break;
    case XEN_BUSPROF_policy_allow:
    case XEN_BUSPROF_policy_revoke: size = sizeof(u.policy); break;
    case XEN_BUSPROF_extract_reply: size = sizeof(u.reply);  break;
    case XEN_BUSPROF_query:         size = sizeof(u.query);  break;
    case XEN_BUSPROF_trap:
    case XEN_BUSPROF_untrap:        size = sizeof(u.trap);   break;
    default:
        return -EOPNOTSUPP;
    }

    memset(&u, 0, sizeof(u));
    if ( copy_from_guest((uint8_t *)&u, arg, size) )
        return -EFAULT;

    d = busprof_host_get_target(caller, u.domid, &rc);
    if ( !d )
        return rc;

    switch ( cmd )
    {
    case XEN_BUSPROF_attach:
        rc = attach(caller, d, &u.attach);
        copy_back = !rc;
        break;

    case XEN_BUSPROF_detach:
        rc = -EINVAL;
        if ( u.domain.pad[0] || u.domain.pad[1] || u.domain.pad[2] )
            break;
        rc = -ENXIO;
        if ( !d->busprof || !d->busprof->attached )
            break;
        busprof_detach_domain(d);
        rc = 0;
        break;

    case XEN_BUSPROF_policy_allow:
    case XEN_BUSPROF_policy_revoke:
        rc = policy(d, &u.policy, cmd == XEN_BUSPROF_policy_allow);
        break;

    case XEN_BUSPROF_extract_reply:
        rc = extract_reply(d, &u.reply);
        break;

    case XEN_BUSPROF_query:
        rc = -EINVAL;
        if ( u.query.pad )
            break;
        query(d, &u.query);
        rc = 0;
        copy_back = true;
        break;

    case XEN_BUSPROF_trap:
    case XEN_BUSPROF_untrap:
        t.first = u.trap.first;
        t.last = u.trap.last;
        t.flags = u.trap.flags;
        rc = cmd == XEN_BUSPROF_trap
             ? trap_add(d, &t, 0, XEN_BUSPROF_CTRL_FROM_DOM0)
             : trap_remove(d, &t, 0, XEN_BUSPROF_CTRL_FROM_DOM0);
        break;
    }

    busprof_host_put_target(d);

    if ( copy_back &&
         copy_to_guest(arg, (uint8_t *)&u, size) )
        rc = -EFAULT;

    return rc;
}

long busprof_op(struct vcpu *curr, unsigned int cmd,
                XEN_GUEST_HANDLE_PARAM(void) arg)
{
    struct xen_busprof_trap t;

    switch ( cmd )
    {
    case XEN_BUSPROF_start_trap:
    case XEN_BUSPROF_stop_trap:
        if ( copy_from_guest(&t, arg, 1) )
            return -EFAULT;
        return cmd == XEN_BUSPROF_start_trap
               ? trap_add(curr->domain, &t, curr->vcpu_id, 0)
               : trap_remove(curr->domain, &t, curr->vcpu_id, 0);

    case XEN_BUSPROF_extract:
    case XEN_BUSPROF_extract_ext:
        return extract(curr, arg, cmd == XEN_BUSPROF_extract_ext);

    case XEN_BUSPROF_version:
        return XEN_BUSPROF_INTERFACE_VERSION;

    case XEN_BUSPROF_pause:
    case XEN_BUSPROF_resume:
        return pause_resume(curr, cmd == XEN_BUSPROF_pause);
    }

    if ( cmd >= XEN_BUSPROF_DOM0_BASE )
        return dom0_op(curr->domain, cmd, arg);

    return -EOPNOTSUPP;
}

/* Caller holds bd->lock. */
static bool route_locked(const struct busprof_domain *bd, unsigned int port,
                         unsigned int size, struct busprof_route *r)
{
    /* Like ioreq server selection, only an access wholly inside. */
    if ( !bd->attached ||
         !busprof_ranges_covers(&bd->traps, port, port + size - 1) )
        return false;

    if ( r )
    {
        r->ioservid = bd->ioservid;
        r->profiler = bd->profiler;
    }

    return true;
}

/* Caller holds bd->lock. */
static void stamp_trap_locked(struct busprof_domain *bd, struct vcpu *v,
                              uint64_t rip, uint64_t task)
{
    struct xen_busprof_stamp *s;
    struct xen_busprof_who *w;

    if ( !bd->page || v->vcpu_id >= XEN_BUSPROF_MAX_VCPUS )
        return;

    s = &bd->page->stamp[v->vcpu_id];
    w = &bd->page->who[v->vcpu_id];
    s->rip = rip;
    s->tsc_trap = busprof_host_tsc();
    w->task = task;
    w->pcpu = v->processor;
    smp_wmb();
    s->seq++;
    bd->trapped++;
}

static bool size_ok(unsigned int port, unsigned int size)
{
    return (size == 1 || size == 2 || size == 4) && port + size - 1 <= 0xffff;
}

bool busprof_route(struct domain *d, unsigned int port, unsigned int size,
                   struct busprof_route *r)
{
    struct busprof_domain *bd = d->busprof;
    bool trapped;

    if ( !bd || !size_ok(port, size) )
        return false;

    spin_lock(&bd->lock);
    trapped = route_locked(bd, port, size, r);
    spin_unlock(&bd->lock);

    return trapped;
}

bool busprof_route_access(struct vcpu *v, unsigned int port,
                          unsigned int size, uint64_t rip, uint64_t task,
                          struct busprof_route *r)
{
    struct busprof_domain *bd = v->domain->busprof;
    bool trapped;

    if ( !bd || !size_ok(port, size) )
        return false;

    /*
     * The decision and the stamp under one hold of the lock: a profiler
     * that detaches finds every access routed to it before counted in its
     * stamp slots, and serves each of them before it lets its server go.
     */
    spin_lock(&bd->lock);
    trapped = route_locked(bd, port, size, r);
    if ( trapped )
        stamp_trap_locked(bd, v, rip, task);
    spin_unlock(&bd->lock);

    return trapped;
}

bool busprof_pio_trapped(struct domain *d, unsigned int port,
                         unsigned int size)
{
    return busprof_route(d, port, size, NULL);
}

void busprof_stamp_trap(struct vcpu *v, uint64_t rip, uint64_t task)
{
    struct busprof_domain *bd = v->domain->busprof;

    if ( !bd )
        return;

    spin_lock(&bd->lock);
    stamp_trap_locked(bd, v, rip, task);
    spin_unlock(&bd->lock);
}

void busprof_stamp_resume(struct vcpu *v)
{
    struct busprof_domain *bd = v->domain->busprof;
    struct xen_busprof_stamp *s;
    uint64_t now = busprof_host_tsc();

    if ( !bd )
        return;

    spin_lock(&bd->lock);
    if ( bd->page && v->vcpu_id < XEN_BUSPROF_MAX_VCPUS )
    {
        s = &bd->page->stamp[v->vcpu_id];
        s->tsc_resume = now;
        smp_wmb();
        s->resume_seq = s->seq;
    }
    spin_unlock(&bd->lock);
}

void busprof_access_timeout(struct vcpu *v, unsigned int port)
{
    struct domain *d = v->domain;
    struct busprof_domain *bd = d->busprof;

    if ( !bd )
        return;

    spin_lock(&bd->lock);
    bd->timeouts++;
    if ( bd->page )
    {
        bd->page->timeouts++;
        ctrl_post(d, bd, XEN_BUSPROF_CTRL_timeout, v->vcpu_id, 0, port, port,
                  0, 0, 0);
    }
    detach_locked(d, bd);
    spin_unlock(&bd->lock);
}

unsigned int busprof_timeout_ms(struct domain *d)
{
    struct busprof_domain *bd = d->busprof;
    unsigned int ms = 0;

    if ( !bd )
        return 0;

    /* A profiler attaches and detaches on other CPUs meanwhile. */
    spin_lock(&bd->lock);
    if ( bd->attached )
        ms = bd->timeout_ms;
    spin_unlock(&bd->lock);

    return ms;
}

void busprof_detach_domain(struct domain *d)
{
    struct busprof_domain *bd = d->busprof;

    if ( !bd )
        return;

    spin_lock(&bd->lock);
    detach_locked(d, bd);
    spin_unlock(&bd->lock);
}

void busprof_domain_destroy(struct domain *d)
{
    struct busprof_domain *bd = d->busprof;

    if ( !bd )
        return;

    busprof_detach_domain(d);
    d->busprof = NULL;
    xfree(bd);
}

/*
 * Local variables:
 * mode: C
 * c-file-style: "BSD"
 * c-basic-offset: 4
 * indent-tabs-mode: nil
 * End:
 */
