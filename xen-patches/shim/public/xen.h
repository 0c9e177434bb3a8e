/* Userspace stand-in: Xen public headers from the installed Xen. */
#include <xen/xen.h>
