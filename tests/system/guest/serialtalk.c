/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * serialtalk: a text sent through a serial port and received back, by the
 * kernel's own serial driver only.  It uses the tty interface as stty and
 * setserial do (open, termios, the serial ioctls, write, read); it makes no
 * port access of its own and knows nothing of busprof.  The busprof system
 * test runs it on COM2 (ttyS1) under dom0's trap: every access in the trace
 * is then the 8250 driver's.
 *
 * usage: serialtalk [-t SECONDS] DEVICE TEXT
 *  1. opens DEVICE and sets its IRQ to 0 (TIOCSSERIAL): the 8250 driver then
 *     polls the UART on a timer.  The guest is granted COM2's ports, not its
 *     interrupt, which stays dom0's; with IRQ 3 an HVM guest's driver would
 *     wait for an interrupt that never comes, and a PVH guest has no IRQ 3.
 *     It reopens DEVICE, so that the open starts the port up with IRQ 0;
 *  2. raw mode, 8N1 at 115200 baud, CLOCAL, no flow control;
 *  3. sets the UART's loopback (TIOCMBIS TIOCM_LOOP: MCR bit 4), in which
 *     the UART sends what it transmits to its own receiver;
 *  4. writes TEXT and reads until as many bytes came back, SECONDS (default
 *     20) at most;
 *  5. clears the loopback, and sets the port's type to unknown
 *     (TIOCSSERIAL, as `setserial DEVICE uart none`): the driver lets the
 *     ports go (release_region), so that another driver may claim them.
 * Prints "SERIAL DEVICE: 16550A at 0x2f8 irq 0 ..." (the driver's view),
 * "SERIAL-SENT n bytes", "SERIAL-RECEIVED n bytes: HEX" and then
 * "SERIAL-OK ..." and exits 0, or "SERIAL-FAIL ..." and exits 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/serial.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

/* include/uapi/linux/serial_core.h */
#define PORT_UNKNOWN 0
/* include/uapi/asm-generic/termios.h: glibc's headers leave it out */
#ifndef TIOCM_LOOP
#define TIOCM_LOOP 0x8000
#endif

static const char *type_name(int type)
{
    static const char *const names[] = { "unknown", "8250", "16450", "16550",
                                         "16550A", "Cirrus", "16650", "16650V2",
                                         "16750" };

    return type >= 0 && type < (int)(sizeof(names) / sizeof(names[0]))
           ? names[type] : "other";
}

static int fail(const char *what, const char *dev)
{
    printf("SERIAL-FAIL %s %s: %s\n", what, dev, strerror(errno));
    return 1;
}

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The port's settings as the driver has them, on one line. */
static int show(int fd, const char *dev, struct serial_struct *ss)
{
    if ( ioctl(fd, TIOCGSERIAL, ss) < 0 )
        return fail("TIOCGSERIAL", dev);
    printf("SERIAL %s: %s at 0x%x irq %d, fifo %d bytes\n", dev,
           type_name(ss->type), ss->port, ss->irq, ss->xmit_fifo_size);
    return 0;
}

int main(int argc, char **argv)
{
    struct serial_struct ss;
    struct termios tio;
    unsigned char got[4096];
    const char *dev, *text;
    double seconds = 20, deadline;
    size_t len, n = 0;
    int fd, opt, loop = TIOCM_LOOP, i;

    while ( (opt = getopt(argc, argv, "t:")) != -1 )
    {
        if ( opt != 't' || (seconds = atof(optarg)) <= 0 )
        {
            fprintf(stderr, "usage: serialtalk [-t SECONDS] DEVICE TEXT\n");
            return 2;
        }
    }
    if ( argc - optind != 2 || !*argv[optind + 1] ||
         strlen(argv[optind + 1]) > sizeof(got) )
    {
        fprintf(stderr, "usage: serialtalk [-t SECONDS] DEVICE TEXT "
                "(1 to %zu bytes)\n", sizeof(got));
        return 2;
    }
    dev = argv[optind];
    text = argv[optind + 1];
    len = strlen(text);

    /* 1: IRQ 0.  As root the open succeeds even where the driver could
     * not start the port up with its IRQ, to let setserial mend it. */
    fd = open(dev, O_RDWR | O_NOCTTY | O_NONBLOCK);
    if ( fd < 0 )
        return fail("open", dev);
    if ( ioctl(fd, TIOCGSERIAL, &ss) < 0 )
        return fail("TIOCGSERIAL", dev);
    if ( ss.type == PORT_UNKNOWN )
    {
        printf("SERIAL-FAIL %s: the driver found no UART at 0x%x\n", dev, ss.port);
        return 1;
    }
    ss.irq = 0;
    if ( ioctl(fd, TIOCSSERIAL, &ss) < 0 )
        return fail("TIOCSSERIAL irq 0", dev);
    close(fd);
    fd = open(dev, O_RDWR | O_NOCTTY | O_NONBLOCK);
    if ( fd < 0 )
        return fail("open again", dev);
    if ( show(fd, dev, &ss) )
        return 1;

    /* 2 */
    if ( tcgetattr(fd, &tio) < 0 )
        return fail("tcgetattr", dev);
    cfmakeraw(&tio);
    tio.c_cflag &= ~(CSTOPB | PARENB | CRTSCTS);
    tio.c_cflag |= CLOCAL | CREAD | CS8;
    tio.c_iflag &= ~(IXON | IXOFF);
    cfsetispeed(&tio, B115200);
    cfsetospeed(&tio, B115200);
    if ( tcsetattr(fd, TCSANOW, &tio) < 0 )
        return fail("tcsetattr", dev);
    tcflush(fd, TCIOFLUSH);

    /* 3, 4 */
    if ( ioctl(fd, TIOCMBIS, &loop) < 0 )
        return fail("TIOCMBIS TIOCM_LOOP", dev);
    deadline = now() + seconds;
    for ( size_t sent = 0; sent < len; )
    {
        ssize_t w = write(fd, text + sent, len - sent);

        if ( w < 0 && errno != EAGAIN && errno != EINTR )
            return fail("write", dev);
        if ( w > 0 )
            sent += w;
        else if ( now() > deadline )
        {
            printf("SERIAL-FAIL %s: %zu of %zu bytes written in %g s\n",
                   dev, sent, len, seconds);
            return 1;
        }
        else
            usleep(1000);
    }
    printf("SERIAL-SENT %zu bytes\n", len);
    while ( n < len && now() < deadline )
    {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        ssize_t r;

        if ( poll(&p, 1, 100) < 0 && errno != EINTR )
            return fail("poll", dev);
        r = read(fd, got + n, sizeof(got) - n);
        if ( r < 0 && errno != EAGAIN && errno != EINTR )
            return fail("read", dev);
        if ( r > 0 )
            n += r;
    }
    printf("SERIAL-RECEIVED %zu bytes:", n);
    for ( i = 0; i < (int)n; i++ )
        printf(" %02x", got[i]);
    printf("\n");

    /* 5 */
    if ( ioctl(fd, TIOCMBIC, &loop) < 0 )
        return fail("TIOCMBIC TIOCM_LOOP", dev);
    if ( ioctl(fd, TIOCGSERIAL, &ss) < 0 )
        return fail("TIOCGSERIAL", dev);
    ss.type = PORT_UNKNOWN;
    if ( ioctl(fd, TIOCSSERIAL, &ss) < 0 )
        return fail("TIOCSSERIAL uart none", dev);
    close(fd);

    if ( n != len || memcmp(got, text, len) )
    {
        printf("SERIAL-FAIL %s: sent %zu bytes, received %zu%s\n", dev, len, n,
               n == len ? ", not the same" : "");
        return 1;
    }
    printf("SERIAL-OK %s: %zu bytes sent and received back equal: %s\n", dev, len,
           text);
    return 0;
}
