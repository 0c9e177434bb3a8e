/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * busprof: small fixed-size tables of port ranges and of MMIO spans.
 *
 * Tables hold at most XEN_BUSPROF_MAX_RANGES entries, sorted by first
 * address and disjoint, so a guest can never make Xen allocate for them.
 * Ports and guest-physical addresses share the code; only the highest
 * address a table takes differs.
 */

#include <xen/busprof.h>
#include <xen/errno.h>
#include <xen/lib.h>

static void remove_at(struct busprof_rangeset *s, unsigned int i)
{
    memmove(&s->r[i], &s->r[i + 1], (s->nr - i - 1) * sizeof(s->r[0]));
    s->nr--;
}

static int insert_at(struct busprof_rangeset *s, unsigned int i,
                     uint64_t first, uint64_t last)
{
    if ( s->nr == XEN_BUSPROF_MAX_RANGES )
        return -ENOSPC;

    memmove(&s->r[i + 1], &s->r[i], (s->nr - i) * sizeof(s->r[0]));
    s->r[i].first = first;
    s->r[i].last = last;
    s->nr++;

    return 0;
}

bool busprof_ranges_overlaps(const struct busprof_rangeset *s,
                             uint64_t first, uint64_t last)
{
    unsigned int i;

    for ( i = 0; i < s->nr; i++ )
        if ( s->r[i].first <= last && first <= s->r[i].last )
            return true;

    return false;
}

bool busprof_ranges_covers(const struct busprof_rangeset *s,
                           uint64_t first, uint64_t last)
{
    unsigned int i;
    uint64_t next = first;

    if ( first > last )
        return false;

    /* Walk the sorted entries, allowing coverage to continue across
     * entries that are adjacent. */
    for ( i = 0; i < s->nr; i++ )
    {
        if ( s->r[i].last < next )
            continue;
        if ( s->r[i].first > next )
            return false;
        if ( s->r[i].last >= last )
            return true;
        next = s->r[i].last + 1;
    }

    return false;
}

/* Entries never end above max, so last + 1 below cannot wrap. */
static int table_add(struct busprof_rangeset *s, uint64_t first,
                     uint64_t last, uint64_t max, bool merge)
{
    unsigned int i;

    if ( first > last || last > max )
        return -EINVAL;

    if ( !merge )
    {
        if ( busprof_ranges_overlaps(s, first, last) )
            return -EEXIST;
        for ( i = 0; i < s->nr && s->r[i].first < first; i++ )
            ;
        return insert_at(s, i, first, last);
    }

    /* Absorb every entry that overlaps or touches [first, last]. */
    for ( i = 0; i < s->nr; )
    {
        if ( s->r[i].first <= last + 1 && first <= s->r[i].last + 1u )
        {
            first = min_t(uint64_t, first, s->r[i].first);
            last = max_t(uint64_t, last, s->r[i].last);
            remove_at(s, i);
        }
        else
            i++;
    }

    for ( i = 0; i < s->nr && s->r[i].first < first; i++ )
        ;

    return insert_at(s, i, first, last);
}

static int table_remove(struct busprof_rangeset *s, uint64_t first,
                        uint64_t last, uint64_t max, bool exact)
{
    unsigned int i;

    if ( first > last || last > max )
        return -EINVAL;

    if ( exact )
    {
        for ( i = 0; i < s->nr; i++ )
            if ( s->r[i].first == first && s->r[i].last == last )
            {
                remove_at(s, i);
                return 0;
            }
        return -ENOENT;
    }

    /* A split needs a free slot; check before changing anything. */
    for ( i = 0; i < s->nr; i++ )
        if ( s->r[i].first < first && s->r[i].last > last &&
             s->nr == XEN_BUSPROF_MAX_RANGES )
            return -ENOSPC;

    for ( i = 0; i < s->nr; )
    {
        struct busprof_range *r = &s->r[i];

        if ( r->last < first || r->first > last )
        {
            i++;
            continue;
        }

        if ( r->first < first && r->last > last )
        {
            uint64_t tail_last = r->last;

            r->last = first - 1;
            return insert_at(s, i + 1, last + 1, tail_last);
        }

        if ( r->first < first )
            r->last = first - 1;
        else if ( r->last > last )
            r->first = last + 1;
        else
        {
            remove_at(s, i);
            continue;
        }
        i++;
    }

    return 0;
}

int busprof_ranges_add(struct busprof_rangeset *s, unsigned int first,
                       unsigned int last, bool merge)
{
    return table_add(s, first, last, 0xffff, merge);
}

int busprof_ranges_remove(struct busprof_rangeset *s, unsigned int first,
                          unsigned int last, bool exact)
{
    return table_remove(s, first, last, 0xffff, exact);
}

int busprof_spans_add(struct busprof_rangeset *s, uint64_t first,
                      uint64_t last, bool merge)
{
    return table_add(s, first, last, BUSPROF_MMIO_MAX_ADDR, merge);
}

int busprof_spans_remove(struct busprof_rangeset *s, uint64_t first,
                         uint64_t last, bool exact)
{
    return table_remove(s, first, last, BUSPROF_MMIO_MAX_ADDR, exact);
}

/*
 * Local variables:
 * mode: C
 * c-file-style: "BSD"
 * c-basic-offset: 4
 * indent-tabs-mode: nil
 * End:
 */
