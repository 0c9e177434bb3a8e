/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * ioport-map: give an HVM or PVH domain direct (1:1) access to a range of real I/O
 * ports, via XEN_DOMCTL_ioport_mapping (xc_domain_ioport_mapping).
 *
 * Unpatched Xen sends a PVH/HVM guest's port I/O to its device model (HVM: QEMU,
 * PVH: none, so reads give 0xff) even with `ioports=` in the config: xl only grants
 * the permission. With a mapping, Xen's g2m_portio handler (xen/arch/x86/hvm/io.c,
 * reached from handle_pio) performs the real access. PV guests don't need this.
 *
 * usage: ioport-map DOMID FIRST NR [add|remove]    (numbers: decimal or 0x hex)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xenctrl.h>

int main(int argc, char **argv)
{
    xc_interface *xch;
    unsigned long domid, first, nr;
    int add = 1, rc;

    if (argc < 4 || argc > 5) {
        fprintf(stderr, "usage: %s DOMID FIRST NR [add|remove]\n", argv[0]);
        return 2;
    }
    domid = strtoul(argv[1], NULL, 0);
    first = strtoul(argv[2], NULL, 0);
    nr = strtoul(argv[3], NULL, 0);
    if (argc == 5)
        add = strcmp(argv[4], "remove") != 0;

    xch = xc_interface_open(NULL, NULL, 0);
    if (!xch) {
        perror("xc_interface_open");
        return 1;
    }
    rc = xc_domain_ioport_mapping(xch, (uint32_t)domid, (uint32_t)first, (uint32_t)first,
                                  (uint32_t)nr, add);
    if (rc) {
        perror("xc_domain_ioport_mapping");
        xc_interface_close(xch);
        return 1;
    }
    printf("ioport-map: dom%lu ports 0x%lx-0x%lx %s 1:1\n", domid, first, first + nr - 1,
           add ? "mapped" : "unmapped");
    xc_interface_close(xch);
    return 0;
}
