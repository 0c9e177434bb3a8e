/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The baseline of the simulated trap path: the same hops with nothing done
 * at any of them.  A guest thread's OUT faults (no I/O permission: SIGSEGV);
 * its handler sends a message on a SOCK_SEQPACKET socket to a "hypervisor"
 * process, whose thread for that vCPU writes an eventfd to a "profiler"
 * process and waits for the answer on another; the profiler waits on every
 * vCPU's eventfd with one poll(), as busprof's daemon does, and writes the
 * vCPU's answer eventfd back; the hypervisor thread replies on the socket
 * and the handler skips the instruction.  The hypervisor thread waits in
 * one blocking read() (WAIT read, as busprof's simulator does) or in poll()
 * and then read() (WAIT poll): neither is faster at every vCPU count.  busprof's simulator, daemon and guest library take the same
 * hops and add the hypervisor core, the ioreq page, the bus access, the
 * stamps and the record.
 * usage: bare_chain ACCESSES THREADS [read|poll]
 * prints WAIT_NS p50 P p99 P p999 P max P and ELAPSED_NS E, as trap_guest,
 * and CPU_NS guest G hypervisor H profiler P: the CPU time of each process.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "bench_cpu.h"

#define MAX_THREADS 8

static int guest_sock[MAX_THREADS], srv_sock[MAX_THREADS];
static int wait_poll;
static int to_dm[MAX_THREADS], from_dm[MAX_THREADS];
static __thread int my_sock = -1;

struct msg {
    uint32_t port, value;
    uint64_t rip;
};

static uint64_t now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* The guest's trap: one message out, one back, then past the OUT (0xee). */
static void on_segv(int sig, siginfo_t *si, void *uc_)
{
    ucontext_t *uc = uc_;
    struct msg m = { 0x3ff, (uint32_t)uc->uc_mcontext.gregs[REG_RAX],
                     (uint64_t)uc->uc_mcontext.gregs[REG_RIP] };

    (void)sig;
    (void)si;
    if ( send(my_sock, &m, sizeof(m), 0) != sizeof(m) ||
         recv(my_sock, &m, sizeof(m), 0) != sizeof(m) )
        _exit(3);
    uc->uc_mcontext.gregs[REG_RIP] += 1;
}

static void *hv_vcpu(void *arg)
{
    long v = (long)arg;
    struct msg m;
    uint64_t one = 1, cnt;

    while ( recv(srv_sock[v], &m, sizeof(m), 0) == sizeof(m) )
    {
        ssize_t n;

        if ( write(to_dm[v], &one, sizeof(one)) != sizeof(one) )
            break;
        if ( wait_poll )
        {
            struct pollfd p = { from_dm[v], POLLIN, 0 };

            while ( poll(&p, 1, -1) < 0 && errno == EINTR )
                ;
        }
        while ( (n = read(from_dm[v], &cnt, sizeof(cnt))) < 0 && errno == EINTR )
            ;
        if ( n != sizeof(cnt) || send(srv_sock[v], &m, sizeof(m), 0) != sizeof(m) )
            break;
    }
    return NULL;
}

static void profiler(int threads, int stop_fd)
{
    struct pollfd p[MAX_THREADS + 1];
    uint64_t cnt, one = 1;
    int v;

    for ( v = 0; v < threads; v++ )
        p[v] = (struct pollfd){ to_dm[v], POLLIN, 0 };
    p[threads] = (struct pollfd){ stop_fd, POLLIN, 0 };
    for ( ;; )
    {
        if ( poll(p, threads + 1, -1) < 0 )
            continue;
        if ( p[threads].revents )
            return;
        for ( v = 0; v < threads; v++ )
            if ( p[v].revents & POLLIN && read(to_dm[v], &cnt, sizeof(cnt)) == sizeof(cnt) )
                (void)!write(from_dm[v], &one, sizeof(one));
    }
}

struct job {
    long n;
    uint64_t *waits;
    int v;
};

static void *guest(void *arg)
{
    struct job *j = arg;
    long i;

    my_sock = guest_sock[j->v];
    for ( i = 0; i < j->n; i++ )
    {
        uint64_t t0 = now();

        __asm__ volatile("outb %b0, %w1" : : "a"((uint8_t)i), "Nd"((uint16_t)0x3ff));
        j->waits[i] = now() - t0;
    }
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], NULL, 0) : 10000;
    int threads = argc > 2 ? atoi(argv[2]) : 1, v, stop[2];
    pid_t prof, hv;
    struct sigaction sa;
    pthread_t tid[MAX_THREADS];
    struct job jobs[MAX_THREADS];
    uint64_t *all, t0, elapsed;
    struct rusage ru_hv, ru_prof, ru_self;

    wait_poll = argc > 3 && !strcmp(argv[3], "poll");
    if ( n < 1 || threads < 1 || threads > MAX_THREADS ||
         (argc > 3 && !wait_poll && strcmp(argv[3], "read")) )
    {
        fprintf(stderr, "usage: bare_chain ACCESSES THREADS(1-%d) [read|poll]\n", MAX_THREADS);
        return 2;
    }
    for ( v = 0; v < threads; v++ )
    {
        int s[2];

        if ( socketpair(AF_UNIX, SOCK_SEQPACKET, 0, s) )
            return 1;
        guest_sock[v] = s[0];
        srv_sock[v] = s[1];
        to_dm[v] = eventfd(0, 0);
        from_dm[v] = eventfd(0, 0);
    }
    if ( pipe(stop) )
        return 1;
    if ( !(prof = fork()) )
    {
        for ( v = 0; v < threads; v++ )
            close(guest_sock[v]), close(srv_sock[v]);
        profiler(threads, stop[0]);
        _exit(0);
    }
    if ( !(hv = fork()) )
    {
        /* The guest's end closes when the guest is done: no other copy. */
        for ( v = 0; v < threads; v++ )
            close(guest_sock[v]);
        for ( v = 0; v < threads; v++ )
            pthread_create(&tid[v], NULL, hv_vcpu, (void *)(long)v);
        for ( v = 0; v < threads; v++ )
            pthread_join(tid[v], NULL);
        _exit(0);
    }
    for ( v = 0; v < threads; v++ )
        close(srv_sock[v]);

    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, NULL);

    all = calloc((size_t)n * threads, sizeof(*all));
    t0 = now();
    for ( v = 0; v < threads; v++ )
    {
        jobs[v] = (struct job){ n, all + n * v, v };
        pthread_create(&tid[v], NULL, guest, &jobs[v]);
    }
    for ( v = 0; v < threads; v++ )
        pthread_join(tid[v], NULL);
    elapsed = now() - t0;

    for ( v = 0; v < threads; v++ )
        close(guest_sock[v]);
    (void)!write(stop[1], "x", 1);
    memset(&ru_hv, 0, sizeof(ru_hv));
    memset(&ru_prof, 0, sizeof(ru_prof));
    wait4(hv, NULL, 0, &ru_hv);
    wait4(prof, NULL, 0, &ru_prof);
    getrusage(RUSAGE_SELF, &ru_self);

    n *= threads;
    qsort(all, n, sizeof(*all), cmp);
    printf("WAIT_NS p50 %llu p99 %llu p999 %llu max %llu\n", (unsigned long long)all[n / 2],
           (unsigned long long)all[n * 99 / 100], (unsigned long long)all[n * 999 / 1000],
           (unsigned long long)all[n - 1]);
    printf("ELAPSED_NS %llu ACCESSES %ld\n", (unsigned long long)elapsed, n);
    printf("CPU_NS guest %llu hypervisor %llu profiler %llu\n", cpu_ns(&ru_self),
           cpu_ns(&ru_hv), cpu_ns(&ru_prof));
    free(all);
    return 0;
}
