/* SPDX-License-Identifier: LGPL-2.1-only */
/* sigsafe.h - async-signal-safe helpers of the trap engines (sigsafe.c). */
#ifndef BUSPROF_SIGSAFE_H
#define BUSPROF_SIGSAFE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A message built up in place and written to stderr in one go. */
struct bp_msgbuf {
    char buf[256];
    size_t len;
};
void bp_msg_str(struct bp_msgbuf *m, const char *s);
void bp_msg_hex(struct bp_msgbuf *m, uint64_t v);
void bp_msg_dec(struct bp_msgbuf *m, int64_t v);
void bp_msg_flush(struct bp_msgbuf *m);

/* n bytes between local and the process's address remote; 0, or -1 where
 * remote is not mapped so (no fault). */
int bp_copy_guest(void *local, uint64_t remote, size_t n, bool to_remote);

/* Up to n bytes from the process's address remote into local, as many as
 * are readable (a page that is not ends the copy); how many, in one
 * system call.  For the code bytes of a faulting instruction. */
size_t bp_read_guest_prefix(void *local, uint64_t remote, size_t n);

/* The base of segment override prefix seg (0x64 FS, 0x65 GS; 0 for the
 * others, which have none in 64-bit mode). */
uint64_t bp_segment_base(uint8_t seg);

#endif
