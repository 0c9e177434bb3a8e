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
 *
 * Memory-mapped spans (interface 1.3) have tables of their own.  Trapping
 * one removes the domain's direct mapping of its pages here, under the
 * domain's lock, together with the table change: there is no moment at
 * which a span is in the table and its pages still reach the device
 * directly, or the other way round.  Every path that drops an MMIO trap
 * (stop, detach, timeout, revoke, destruction) maps its pages back.
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

/* The first interface whose profiler knows MMIO (WIDE messages). */
#define BUSPROF_VERSION_MMIO 0x00010003

#define MMIO_PAGE_MASK (XEN_BUSPROF_MMIO_PAGE_SIZE - 1)

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

/*
 * Caller holds bd->lock.  wide: the message's span is in ctrl_span[] and
 * ctrl_space[] (XEN_BUSPROF_CTRL_WIDE), first and last are then 0.
 */
static void ctrl_post_span(struct domain *d, struct busprof_domain *bd,
                           uint32_t kind, unsigned int vcpu,
                           unsigned int flags, unsigned int first,
                           unsigned int last,
                           const struct xen_busprof_span *wide, uint32_t nr,
                           uint64_t offset, uint64_t snapshot)
{
    struct xen_busprof_page *pg = bd->page;
    struct xen_busprof_ctrl_msg *m;
    uint32_t prod, cons;
    unsigned int i;

    if ( !pg )
        return;

    prod = pg->ctrl_prod;
    cons = ACCESS_ONCE(pg->ctrl_cons);
    if ( prod - cons >= XEN_BUSPROF_CTRL_RING_SIZE )
    {
        pg->ctrl_lost++;
        return;
    }

    i = prod % XEN_BUSPROF_CTRL_RING_SIZE;
    m = &pg->ring[i];
    pg->ctrl_span[i].first = wide ? wide->first : 0;
    pg->ctrl_span[i].last = wide ? wide->last : 0;
    pg->ctrl_space[i] = wide ? wide->space : 0;
    if ( wide )
    {
        flags |= XEN_BUSPROF_CTRL_WIDE;
        first = last = 0;
    }
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

/* Caller holds bd->lock.  A message about ports, as before 1.3. */
static void ctrl_post(struct domain *d, struct busprof_domain *bd,
                      uint32_t kind, unsigned int vcpu, unsigned int flags,
                      unsigned int first, unsigned int last, uint32_t nr,
                      uint64_t offset, uint64_t snapshot)
{
    ctrl_post_span(d, bd, kind, vcpu, flags, first, last, NULL, nr, offset,
                   snapshot);
}

/* Caller holds bd->lock.  A message about an MMIO span of d. */
static void ctrl_post_mmio(struct domain *d, struct busprof_domain *bd,
                           uint32_t kind, unsigned int vcpu,
                           unsigned int flags, uint64_t first, uint64_t last)
{
    struct xen_busprof_span span = {
        .first = first, .last = last, .space = XEN_BUSPROF_SPACE_MMIO,
    };

    ctrl_post_span(d, bd, kind, vcpu, flags, 0, 0, &span, 0, 0, 0);
}

static bool ctrl_ring_full(const struct busprof_domain *bd)
{
    const struct xen_busprof_page *pg = bd->page;

    return pg->ctrl_prod - ACCESS_ONCE(pg->ctrl_cons) >=
           XEN_BUSPROF_CTRL_RING_SIZE;
}

static uint64_t span_pages(uint64_t first, uint64_t last)
{
    return (last - first + 1) >> XEN_BUSPROF_MMIO_PAGE_SHIFT;
}

/*
 * Caller holds bd->lock.  Drop MMIO trap i and map its pages back; post
 * its stop message if kind is not 0.
 */
static void mmio_trap_drop(struct domain *d, struct busprof_domain *bd,
                           unsigned int i, uint32_t kind, unsigned int vcpu,
                           unsigned int flags)
{
    struct busprof_range t = bd->mmio_traps.r[i];
    unsigned int nr = span_pages(t.first, t.last);

    busprof_host_mmio_restore(d, t.first >> XEN_BUSPROF_MMIO_PAGE_SHIFT, nr);
    bd->mmio_pages -= nr;
    busprof_spans_remove(&bd->mmio_traps, t.first, t.last, true);
    if ( kind )
        ctrl_post_mmio(d, bd, kind, vcpu, flags, t.first, t.last);
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
    while ( bd->mmio_traps.nr )
        mmio_trap_drop(d, bd, 0, 0, 0, 0);
    ASSERT(!bd->mmio_pages);

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
 * A span's bounds: ports up to 0xffff; MMIO whole pages of at most
 * BUSPROF_MMIO_MAX_ADDR.  pages: a trap's or policy's MMIO span must be
 * whole pages, an extract's need not.
 */
static int check_span(const struct xen_busprof_span *s, bool pages)
{
    if ( s->flags || s->first > s->last )
        return -EINVAL;

    switch ( s->space )
    {
    case XEN_BUSPROF_SPACE_PIO:
        return s->last > 0xffff ? -EINVAL : 0;

    case XEN_BUSPROF_SPACE_MMIO:
        if ( s->last > BUSPROF_MMIO_MAX_ADDR )
            return -EINVAL;
        if ( pages && ((s->first & MMIO_PAGE_MASK) ||
                       ((s->last + 1) & MMIO_PAGE_MASK)) )
            return -EINVAL;
        return 0;
    }

    return -EINVAL;
}

/* Unmap d's pages [gfn, gfn + nr), all or none. */
static int mmio_unmap(struct domain *d, uint64_t gfn, unsigned int nr)
{
    unsigned int done = 0;
    int rc = busprof_host_mmio_unmap(d, gfn, nr, &done);

    if ( rc && done )
        busprof_host_mmio_restore(d, gfn, min_t(unsigned int, done, nr));

    return rc;
}

/*
 * Trap an MMIO span of d, for the guest itself or for dom0, as trap_add()
 * does ports.  The span's pages are unmapped under the lock, with the
 * table change.
 */
static int mmio_trap_add(struct domain *d, const struct xen_busprof_span *s,
                         unsigned int vcpu, unsigned int flags)
{
    struct busprof_domain *bd = busprof_get(d, false);
    uint64_t gfn = s->first >> XEN_BUSPROF_MMIO_PAGE_SHIFT;
    uint64_t nr = span_pages(s->first, s->last);
    int rc;

    if ( !busprof_host_is_hvm(d) )
        return -EOPNOTSUPP;
    if ( !bd )
        return -EPERM;

    spin_lock(&bd->lock);

    rc = -EPERM;
    if ( !busprof_ranges_covers(&bd->mmio_policy, s->first, s->last) )
        goto out;

    /* Before the host walks the pages: a walk is bounded by the limit. */
    rc = -ENOSPC;
    if ( nr > XEN_BUSPROF_MAX_MMIO_PAGES )
        goto out;

    rc = -EPERM;
    if ( !busprof_host_iomem_permitted(d, gfn, nr) )
        goto out;

    rc = -EXDEV;
    if ( !busprof_host_mmio_direct(d, gfn, nr) )
        goto out;

    rc = -ENXIO;
    if ( !bd->attached || bd->version < BUSPROF_VERSION_MMIO )
        goto out;

    rc = -EEXIST;
    if ( busprof_ranges_overlaps(&bd->mmio_traps, s->first, s->last) )
        goto out;

    rc = -ENOSPC;
    if ( bd->mmio_traps.nr == XEN_BUSPROF_MAX_RANGES ||
         nr > XEN_BUSPROF_MAX_MMIO_PAGES - bd->mmio_pages )
        goto out;

    rc = busprof_host_server_ready(d, bd->ioservid, bd->profiler);
    if ( rc )
        goto out;

    rc = mmio_unmap(d, gfn, nr);
    if ( rc )
        goto out;

    rc = busprof_spans_add(&bd->mmio_traps, s->first, s->last, false);
    ASSERT(!rc);
    if ( rc )
    {
        /* Never a page unmapped without its trap. */
        busprof_host_mmio_restore(d, gfn, nr);
        goto out;
    }
    bd->mmio_pages += nr;
    ctrl_post_mmio(d, bd, XEN_BUSPROF_CTRL_start_trap, vcpu, flags, s->first,
                   s->last);

 out:
    spin_unlock(&bd->lock);

    return rc;
}

static int mmio_trap_remove(struct domain *d, const struct xen_busprof_span *s,
                            unsigned int vcpu, unsigned int flags)
{
    struct busprof_domain *bd = busprof_get(d, false);
    unsigned int i;
    int rc = -ENOENT;

    if ( !bd )
        return -ENOENT;

    spin_lock(&bd->lock);
    for ( i = 0; i < bd->mmio_traps.nr; i++ )
        if ( bd->mmio_traps.r[i].first == s->first &&
             bd->mmio_traps.r[i].last == s->last )
        {
            mmio_trap_drop(d, bd, i, XEN_BUSPROF_CTRL_stop_trap, vcpu, flags);
            rc = 0;
            break;
        }
    spin_unlock(&bd->lock);

    return rc;
}

/* start_trap_span / stop_trap_span, and dom0's trap_span / untrap_span. */
static int span_trap(struct domain *d, const struct xen_busprof_span *s,
                     bool start, unsigned int vcpu, unsigned int flags)
{
    struct xen_busprof_trap t;
    int rc = check_span(s, true);

    if ( rc )
        return rc;

    if ( s->space == XEN_BUSPROF_SPACE_MMIO )
        return start ? mmio_trap_add(d, s, vcpu, flags)
                     : mmio_trap_remove(d, s, vcpu, flags);

    t.first = s->first;
    t.last = s->last;
    t.flags = 0;
    return start ? trap_add(d, &t, vcpu, flags)
                 : trap_remove(d, &t, vcpu, flags);
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

/* An extract request, whichever sub-op made it. */
struct extract_req {
    uint64_t first, last;
    uint32_t space;
    uint32_t nr;
    uint64_t offset, snapshot;
    size_t form;                      /* size of the guest's record form */
};

static bool extract_matches(const struct busprof_domain *bd,
                            const struct vcpu *v, const struct extract_req *x)
{
    return bd->extract.vcpu == v->vcpu_id && bd->extract.form == x->form &&
           bd->extract.space == x->space && bd->extract.first == x->first &&
           bd->extract.last == x->last && bd->extract.nr == x->nr &&
           bd->extract.offset == x->offset &&
           bd->extract.snapshot == x->snapshot;
}

/*
 * Records come in three forms, each the first bytes of the next: plain
 * (struct xen_busprof_record), ext and wide.  Xen keeps wide ones and cuts
 * or widens them in place.
 *
 * Narrow: record i moves down from i * sizeof(wide) to i * form, so
 * nothing is overwritten before it is read.  A plain record says nothing
 * of who made the access, so it does not carry XEN_BUSPROF_RECORD_WHO.
 */
static void records_narrow(struct xen_busprof_record_wide *w, unsigned int nr,
                           size_t form)
{
    uint8_t *base = (uint8_t *)w;
    unsigned int i;

    for ( i = 0; i < nr; i++ )
    {
        struct xen_busprof_record *rec = (void *)(base + i * form);

        memmove(rec, &w[i], form);
        if ( form == sizeof(struct xen_busprof_record) )
        {
            rec->flags &= ~XEN_BUSPROF_RECORD_WHO;
            memset(rec->pad, 0, sizeof(rec->pad));
        }
    }
}

/*
 * Widen the records of an older profiler (form: their size), from the last
 * down, so that no record is overwritten before it is read.  Only ports
 * have narrower forms; a plain record says nothing of who made the access.
 */
static void records_widen(struct xen_busprof_record_wide *w, unsigned int nr,
                          size_t form)
{
    const uint8_t *base = (const uint8_t *)w;
    unsigned int i;

    for ( i = nr; i-- > 0; )
    {
        memmove(&w[i], base + i * form, form);
        if ( form == sizeof(struct xen_busprof_record) )
        {
            w[i].ext.rec.flags &= ~XEN_BUSPROF_RECORD_WHO;
            w[i].ext.task = 0;
            w[i].ext.pcpu = 0;
            w[i].ext.pad = 0;
        }
        w[i].addr = w[i].ext.rec.port;
        w[i].value = w[i].ext.rec.value;
        w[i].space = XEN_BUSPROF_SPACE_PIO;
        w[i].pad = 0;
    }
}

/*
 * A profiler's wide records: a known space and an address in it; the ext
 * part made to say the same (an MMIO record has port 0 and the low 32
 * bits of its value), so a narrower form reads the same access.
 */
static int records_check_wide(struct xen_busprof_record_wide *w,
                              unsigned int nr)
{
    unsigned int i;

    for ( i = 0; i < nr; i++ )
    {
        if ( w[i].space == XEN_BUSPROF_SPACE_PIO && w[i].addr <= 0xffff )
            w[i].ext.rec.port = w[i].addr;
        else if ( w[i].space == XEN_BUSPROF_SPACE_MMIO &&
                  w[i].addr <= BUSPROF_MMIO_MAX_ADDR )
            w[i].ext.rec.port = 0;
        else
            return -EINVAL;
        w[i].ext.rec.value = w[i].value;
        w[i].pad = 0;
    }

    return 0;
}

/*
 * XEN_BUSPROF_extract, extract_ext and extract_wide; form is the size of
 * the record the guest asked for.  The first two have the same argument
 * but for the type of buffer.
 */
static int extract(struct vcpu *v, XEN_GUEST_HANDLE_PARAM(void) arg,
                   size_t form)
{
    struct domain *d = v->domain;
    struct busprof_domain *bd = busprof_get(d, false);
    union {
        struct xen_busprof_extract plain;
        struct xen_busprof_extract_ext ext;
        struct xen_busprof_extract_wide wide;
    } u;
    struct extract_req x;
    struct xen_busprof_record_wide *records = NULL;
    bool wide = form == sizeof(struct xen_busprof_record_wide);
    bool answered = false;
    uint32_t nr = 0;
    s_time_t timeout;
    int rc;

    BUILD_BUG_ON(sizeof(struct xen_busprof_extract) !=
                 sizeof(struct xen_busprof_extract_ext));

    if ( wide )
    {
        if ( copy_from_guest(&u.wide, arg, 1) )
            return -EFAULT;
        rc = check_span(&u.wide.span, false);
        if ( rc )
            return rc;
        if ( u.wide.pad || u.wide.nr > XEN_BUSPROF_EXTRACT_MAX )
            return -EINVAL;
        x.first = u.wide.span.first;
        x.last = u.wide.span.last;
        x.space = u.wide.span.space;
        x.nr = u.wide.nr;
        x.offset = u.wide.offset;
        x.snapshot = u.wide.snapshot;
    }
    else
    {
        if ( copy_from_guest(&u.plain, arg, 1) )
            return -EFAULT;
        if ( u.plain.first > u.plain.last ||
             u.plain.nr > XEN_BUSPROF_EXTRACT_MAX )
            return -EINVAL;
        x.first = u.plain.first;
        x.last = u.plain.last;
        x.space = XEN_BUSPROF_SPACE_PIO;
        x.nr = u.plain.nr;
        x.offset = u.plain.offset;
        x.snapshot = u.plain.snapshot;
    }
    x.form = form;

    if ( !bd )
        return -ENXIO;

    spin_lock(&bd->lock);

    rc = -ENXIO;
    if ( !bd->attached ||
         (x.space != XEN_BUSPROF_SPACE_PIO &&
          bd->version < BUSPROF_VERSION_MMIO) )
        goto out;

    timeout = MILLISECS(bd->timeout_ms) * BUSPROF_EXTRACT_TIMEOUTS;

    if ( bd->extract.state != BUSPROF_EXTRACT_IDLE &&
         !extract_matches(bd, v, &x) )
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
        if ( x.space == XEN_BUSPROF_SPACE_PIO )
            ctrl_post(d, bd, XEN_BUSPROF_CTRL_extract, v->vcpu_id, 0, x.first,
                      x.last, x.nr, x.offset, x.snapshot);
        else
            ctrl_post_span(d, bd, XEN_BUSPROF_CTRL_extract, v->vcpu_id, 0, 0,
                           0, &u.wide.span, x.nr, x.offset, x.snapshot);
        bd->extract.state = BUSPROF_EXTRACT_POSTED;
        bd->extract.seq = bd->ctrl_seq;
        bd->extract.vcpu = v->vcpu_id;
        bd->extract.form = x.form;
        bd->extract.space = x.space;
        bd->extract.first = x.first;
        bd->extract.last = x.last;
        bd->extract.nr = x.nr;
        bd->extract.offset = x.offset;
        bd->extract.snapshot = x.snapshot;
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
        nr = bd->extract.nr_out;
        /* The OUT fields sit alike in the plain and ext arguments. */
        if ( wide )
        {
            u.wide.nr = nr;
            u.wide.total = bd->extract.total;
            u.wide.snapshot = bd->extract.snapshot_out;
        }
        else
        {
            u.plain.nr = nr;
            u.plain.total = bd->extract.total;
            u.plain.snapshot = bd->extract.snapshot_out;
        }
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
        if ( !rc && nr && wide )
        {
            if ( copy_to_guest(u.wide.buffer, records, nr) )
                rc = -EFAULT;
        }
        else if ( !rc && nr )
        {
            records_narrow(records, nr, form);
            if ( form == sizeof(struct xen_busprof_record_ext)
                 ? copy_to_guest(u.ext.buffer,
                                 (struct xen_busprof_record_ext *)records, nr)
                 : copy_to_guest(u.plain.buffer,
                                 (struct xen_busprof_record *)records, nr) )
                rc = -EFAULT;
        }
        xfree(records);
        if ( !rc && (wide ? copy_to_guest(arg, &u.wide, 1)
                          : copy_to_guest(arg, &u.plain, 1)) )
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

    /* The page, 1.3's ctrl_span[] and ctrl_space[] included, is one frame. */
    BUILD_BUG_ON(sizeof(struct xen_busprof_page) > 4096);

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
    bd->version = a->version;
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
    struct xen_busprof_record_wide *records = NULL;
    const unsigned int forms = XEN_BUSPROF_REPLY_EXT | XEN_BUSPROF_REPLY_WIDE;
    size_t form = sizeof(struct xen_busprof_record);
    int rc;

    if ( (r->flags & ~forms) || (r->flags & forms) == forms || r->pad1 ||
         r->status > 0 || r->status < -BUSPROF_MAX_ERRNO ||
         r->nr > XEN_BUSPROF_EXTRACT_MAX )
        return -EINVAL;
    if ( !bd )
        return -ENOENT;

    if ( r->flags & XEN_BUSPROF_REPLY_EXT )
        form = sizeof(struct xen_busprof_record_ext);
    else if ( r->flags & XEN_BUSPROF_REPLY_WIDE )
        form = sizeof(struct xen_busprof_record_wide);

    if ( r->nr )
    {
        records = xmalloc_array(struct xen_busprof_record_wide, r->nr);
        if ( !records )
            return -ENOMEM;
        switch ( form )
        {
        case sizeof(struct xen_busprof_record_wide):
            rc = copy_from_guest(records,
                                 guest_handle_cast(r->records,
                                                   xen_busprof_record_wide_t),
                                 r->nr);
            break;
        case sizeof(struct xen_busprof_record_ext):
            rc = copy_from_guest((struct xen_busprof_record_ext *)records,
                                 guest_handle_cast(r->records,
                                                   xen_busprof_record_ext_t),
                                 r->nr);
            break;
        default:
            rc = copy_from_guest((struct xen_busprof_record *)records,
                                 guest_handle_cast(r->records,
                                                   xen_busprof_record_t),
                                 r->nr);
            break;
        }
        if ( rc )
        {
            xfree(records);
            return -EFAULT;
        }
        if ( form == sizeof(struct xen_busprof_record_wide) )
            rc = records_check_wide(records, r->nr);
        else
            records_widen(records, r->nr, form);
        if ( rc )
        {
            xfree(records);
            return rc;
        }
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
            struct busprof_range t = bd->traps.r[i];

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

/*
 * The MMIO policy, as policy() is the port one: merged whole pages; a
 * revoke drops every MMIO trap no longer inside and maps its pages back.
 */
static int mmio_policy(struct domain *d, const struct xen_busprof_span *s,
                       bool allow)
{
    struct busprof_domain *bd;
    unsigned int i;
    int rc;

    bd = busprof_get(d, allow);
    if ( !bd )
        return allow ? -ENOMEM : 0;

    spin_lock(&bd->lock);

    if ( allow )
        rc = busprof_spans_add(&bd->mmio_policy, s->first, s->last, true);
    else
    {
        rc = busprof_spans_remove(&bd->mmio_policy, s->first, s->last, false);

        for ( i = 0; !rc && i < bd->mmio_traps.nr; )
        {
            const struct busprof_range *t = &bd->mmio_traps.r[i];

            if ( busprof_ranges_covers(&bd->mmio_policy, t->first, t->last) )
                i++;
            else
                mmio_trap_drop(d, bd, i, XEN_BUSPROF_CTRL_stop_trap, 0,
                               XEN_BUSPROF_CTRL_FROM_DOM0);
        }
    }

    spin_unlock(&bd->lock);

    return rc;
}

/* policy_allow_span / policy_revoke_span. */
static int span_policy(struct domain *d, const struct xen_busprof_dom0_span *p,
                       bool allow)
{
    struct xen_busprof_policy pp = { .domid = p->domid };
    int rc = check_span(&p->span, true);

    if ( rc )
        return rc;
    if ( p->pad[0] || p->pad[1] || p->pad[2] )
        return -EINVAL;

    if ( p->span.space == XEN_BUSPROF_SPACE_MMIO )
        return mmio_policy(d, &p->span, allow);

    pp.first = p->span.first;
    pp.last = p->span.last;
    return policy(d, &pp, allow);
}

static void ranges_out(const struct busprof_rangeset *s,
                       struct xen_busprof_mmio_range *out)
{
    unsigned int i;

    for ( i = 0; i < s->nr; i++ )
    {
        out[i].first = s->r[i].first;
        out[i].last = s->r[i].last;
    }
}

static void query_mmio(struct domain *d, struct xen_busprof_query_mmio *q)
{
    struct busprof_domain *bd = busprof_get(d, false);
    domid_t domid = q->domid;

    memset(q, 0, sizeof(*q));
    q->domid = domid;

    if ( !bd )
        return;

    spin_lock(&bd->lock);
    q->nr_policy = bd->mmio_policy.nr;
    q->nr_traps = bd->mmio_traps.nr;
    q->nr_pages = bd->mmio_pages;
    ranges_out(&bd->mmio_policy, q->policy);
    ranges_out(&bd->mmio_traps, q->traps);
    spin_unlock(&bd->lock);
}

static void query(struct domain *d, struct xen_busprof_query *q)
{
    struct busprof_domain *bd = busprof_get(d, false);
    domid_t domid = q->domid;
    unsigned int i;

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
    for ( i = 0; i < bd->policy.nr; i++ )
    {
        q->policy[i].first = bd->policy.r[i].first;
        q->policy[i].last = bd->policy.r[i].last;
    }
    for ( i = 0; i < bd->traps.nr; i++ )
    {
        q->traps[i].first = bd->traps.r[i].first;
        q->traps[i].last = bd->traps.r[i].last;
    }
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
        struct xen_busprof_dom0_span span;
        struct xen_busprof_query_mmio query_mmio;
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
    case XEN_BUSPROF_policy_allow_span:
    case XEN_BUSPROF_policy_revoke_span:
    case XEN_BUSPROF_trap_span:
    case XEN_BUSPROF_untrap_span:   size = sizeof(u.span);   break;
    case XEN_BUSPROF_query_mmio:    size = sizeof(u.query_mmio); break;
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

    case XEN_BUSPROF_policy_allow_span:
    case XEN_BUSPROF_policy_revoke_span:
        rc = span_policy(d, &u.span, cmd == XEN_BUSPROF_policy_allow_span);
        break;

    case XEN_BUSPROF_trap_span:
    case XEN_BUSPROF_untrap_span:
        rc = -EINVAL;
        if ( u.span.pad[0] || u.span.pad[1] || u.span.pad[2] )
            break;
        rc = span_trap(d, &u.span.span, cmd == XEN_BUSPROF_trap_span, 0,
                       XEN_BUSPROF_CTRL_FROM_DOM0);
        break;

    case XEN_BUSPROF_query_mmio:
        rc = -EINVAL;
        if ( u.query_mmio.pad[0] || u.query_mmio.pad[1] ||
             u.query_mmio.pad[2] )
            break;
        query_mmio(d, &u.query_mmio);
        rc = 0;
        copy_back = true;
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
    struct xen_busprof_span s;

    switch ( cmd )
    {
    case XEN_BUSPROF_start_trap_span:
    case XEN_BUSPROF_stop_trap_span:
        if ( copy_from_guest(&s, arg, 1) )
            return -EFAULT;
        return span_trap(curr->domain, &s, cmd == XEN_BUSPROF_start_trap_span,
                         curr->vcpu_id, 0);

    case XEN_BUSPROF_start_trap:
    case XEN_BUSPROF_stop_trap:
        if ( copy_from_guest(&t, arg, 1) )
            return -EFAULT;
        return cmd == XEN_BUSPROF_start_trap
               ? trap_add(curr->domain, &t, curr->vcpu_id, 0)
               : trap_remove(curr->domain, &t, curr->vcpu_id, 0);

    case XEN_BUSPROF_extract:
    case XEN_BUSPROF_extract_ext:
        return extract(curr, arg,
                       cmd == XEN_BUSPROF_extract_ext
                       ? sizeof(struct xen_busprof_record_ext)
                       : sizeof(struct xen_busprof_record));

    case XEN_BUSPROF_extract_wide:
        return extract(curr, arg, sizeof(struct xen_busprof_record_wide));

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

/* Caller holds bd->lock.  traps: the table of the access's space. */
static bool route_locked(const struct busprof_domain *bd,
                         const struct busprof_rangeset *traps, uint64_t addr,
                         unsigned int size, struct busprof_route *r)
{
    /* Like ioreq server selection, only an access wholly inside. */
    if ( !bd->attached ||
         !busprof_ranges_covers(traps, addr, addr + size - 1) )
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
    trapped = route_locked(bd, &bd->traps, port, size, r);
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
    trapped = route_locked(bd, &bd->traps, port, size, r);
    if ( trapped )
        stamp_trap_locked(bd, v, rip, task);
    spin_unlock(&bd->lock);

    return trapped;
}

static bool mmio_size_ok(uint64_t gpa, unsigned int size)
{
    return (size == 1 || size == 2 || size == 4 || size == 8) &&
           gpa <= BUSPROF_MMIO_MAX_ADDR - (size - 1);
}

bool busprof_route_mmio(struct domain *d, uint64_t gpa, unsigned int size,
                        struct busprof_route *r)
{
    struct busprof_domain *bd = d->busprof;
    bool trapped;

    if ( !bd || !mmio_size_ok(gpa, size) )
        return false;

    spin_lock(&bd->lock);
    trapped = route_locked(bd, &bd->mmio_traps, gpa, size, r);
    spin_unlock(&bd->lock);

    return trapped;
}

bool busprof_route_mmio_access(struct vcpu *v, uint64_t gpa,
                               unsigned int size, uint64_t rip, uint64_t task,
                               struct busprof_route *r)
{
    struct busprof_domain *bd = v->domain->busprof;
    bool trapped;

    if ( !bd || !mmio_size_ok(gpa, size) )
        return false;

    /* As busprof_route_access(): decision and stamp under one hold. */
    spin_lock(&bd->lock);
    trapped = route_locked(bd, &bd->mmio_traps, gpa, size, r);
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

/* wide: the MMIO access's span, or NULL for an access to port. */
static void access_timeout(struct vcpu *v, unsigned int port,
                           const struct xen_busprof_span *wide)
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
        ctrl_post_span(d, bd, XEN_BUSPROF_CTRL_timeout, v->vcpu_id, 0, port,
                       port, wide, 0, 0, 0);
    }
    detach_locked(d, bd);
    spin_unlock(&bd->lock);
}

void busprof_access_timeout(struct vcpu *v, unsigned int port)
{
    access_timeout(v, port, NULL);
}

void busprof_mmio_access_timeout(struct vcpu *v, uint64_t gpa,
                                 unsigned int size)
{
    struct xen_busprof_span span = {
        .first = gpa, .last = gpa + size - 1,
        .space = XEN_BUSPROF_SPACE_MMIO,
    };

    access_timeout(v, 0, &span);
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
