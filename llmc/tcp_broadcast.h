/*
 * TCP bootstrap: rank 0 sends a small blob (the NCCL unique id) to every other rank, for
 * launches without MPI (torchrun, SLURM without PMI). Host code, no CUDA, so it is tested on CPUs.
 *
 * Rank 0 listens on <port> and accepts world_size-1 connections; every other rank connects to
 * <addr>:<port> (retrying while rank 0 is not up yet), says its rank, and receives the blob.
 * Everything has a deadline: a rank that cannot reach rank 0, or a rank 0 that does not hear
 * from every rank, stops with an error that says which ranks and what to check. The deadline
 * counts the time this process ran (a WaitClock, utils.h), so a rank stopped and continued (a
 * debugger, a suspended job) does not find it passed on waking.
 *
 * The port: LLMC_BOOTSTRAP_PORT if set, else MASTER_PORT + 1 (torchrun's own store already
 * listens on MASTER_PORT), else, where -ps names rank 0's host (llm.c's -pi tcp), llm.c's 12345.
 */
#ifndef LLMC_TCP_BROADCAST_H
#define LLMC_TCP_BROADCAST_H

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include "utils.h"

#define BOOTSTRAP_MAGIC 0x4c4c4d43u  // "LLMC"

// 1 once fd is ready for events, 0 when the clock runs out, -1 on an error. Polls in slices of
// 0.2 s so that the clock (utils.h) counts every slice this process ran and none it was stopped for
static inline int bs_wait(int fd, short events, WaitClock *clock) {
    for (;;) {
        if (wait_clock_expired(clock)) { return 0; }
        int ms = (int)(clock->left * 1000.0);
        struct pollfd p = {fd, events, 0};
        int r = poll(&p, 1, ms > 200 ? 200 : ms < 1 ? 1 : ms);
        if (r > 0) { return 1; }
        if (r < 0 && errno != EINTR) { return -1; }
    }
}

// send or receive exactly len bytes before the clock runs out; 0 on success
static inline int bs_io(int fd, void *buf, size_t len, int sending, WaitClock *clock) {
    char *p = (char *)buf;
    while (len > 0) {
        if (bs_wait(fd, sending ? POLLOUT : POLLIN, clock) != 1) { return -1; }
        ssize_t n = sending ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
        if (n <= 0) {
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) { continue; }
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

// a connected socket to ai, or -1; the connect is non-blocking, so an address that drops the
// packets costs the clock's time, not the kernel's two minutes
static inline int bs_connect(const struct addrinfo *ai, WaitClock *clock) {
    int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0) { return -1; }
    int flags = fcntl(fd, F_GETFL, 0), err = 0;
    socklen_t errlen = sizeof(err);
    fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 &&
        (errno != EINPROGRESS || bs_wait(fd, POLLOUT, clock) != 1 ||
         getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &errlen) != 0 || err != 0)) {
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, flags);
    return fd;
}

// LLMC_BOOTSTRAP_PORT, else MASTER_PORT + 1, else fallback (0: an error)
static inline int bootstrap_port_or(int fallback) {
    const char *s = getenv("LLMC_BOOTSTRAP_PORT");
    int base_plus = 0;
    if (s == NULL || s[0] == '\0') { s = getenv("MASTER_PORT"); base_plus = 1; }
    if ((s == NULL || s[0] == '\0') && fallback > 0) { return fallback; }
    if (s == NULL || s[0] == '\0') {
        llmc_die("several processes without MPI need MASTER_ADDR and MASTER_PORT (torchrun sets them; under SLURM "
                 "export MASTER_ADDR=<first node> MASTER_PORT=29500) or LLMC_BOOTSTRAP_PORT");
    }
    char *end;
    long p = strtol(s, &end, 10);
    if (*end != '\0' || p <= 0 || p + base_plus > 65535) { llmc_die("bad port '%s' in MASTER_PORT/LLMC_BOOTSTRAP_PORT", s); }
    return (int)p + base_plus;
}

/*
 * Broadcast `len` bytes from rank 0 to all ranks over TCP. addr: rank 0's host (MASTER_ADDR).
 * Dies with a message naming the problem if it does not complete within timeout_s seconds.
 */
static inline void bootstrap_tcp_bcast(void *blob, size_t len, int rank, int world_size, const char *addr, int port,
                                       int timeout_s) {
    WaitClock clock = wait_clock_start(timeout_s);
    uint32_t msg[2];
    if (rank == 0) {
        int srv = socket(AF_INET6, SOCK_STREAM, 0);
        int v6 = 1;
        if (srv < 0) { srv = socket(AF_INET, SOCK_STREAM, 0); v6 = 0; }
        if (srv < 0) { llmc_die("bootstrap: socket() failed: %s", strerror(errno)); }
        int one = 1, zero = 0;
        setsockopt(srv, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        int rc;
        if (v6) {
            setsockopt(srv, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));  // accept IPv4 too
            struct sockaddr_in6 sa;
            memset(&sa, 0, sizeof(sa));
            sa.sin6_family = AF_INET6;
            sa.sin6_addr = in6addr_any;
            sa.sin6_port = htons((uint16_t)port);
            rc = bind(srv, (struct sockaddr *)&sa, sizeof(sa));
        } else {
            struct sockaddr_in sa;
            memset(&sa, 0, sizeof(sa));
            sa.sin_family = AF_INET;
            sa.sin_addr.s_addr = htonl(INADDR_ANY);
            sa.sin_port = htons((uint16_t)port);
            rc = bind(srv, (struct sockaddr *)&sa, sizeof(sa));
        }
        if (rc != 0 || listen(srv, world_size) != 0) {
            llmc_die("bootstrap: rank 0 cannot listen on port %d: %s; pick a free port with LLMC_BOOTSTRAP_PORT", port,
                     strerror(errno));
        }
        char *seen = (char *)callocCheck(world_size, 1);
        int joined = 1;
        while (joined < world_size) {
            if (bs_wait(srv, POLLIN, &clock) != 1) {
                char missing[256];
                missing_ranks_list(missing, sizeof(missing), seen, world_size);
                llmc_die("bootstrap: only %d of %d ranks reached rank 0 on port %d within %d s (missing: %s); did they all "
                         "start, with the same MASTER_ADDR/MASTER_PORT or -ps? (-pt sets the timeout)", joined, world_size, port,
                         timeout_s, missing);
            }
            int fd = accept(srv, NULL, NULL);
            if (fd < 0) { continue; }
            if (bs_io(fd, msg, sizeof(msg), 0, &clock) != 0 || msg[0] != BOOTSTRAP_MAGIC || msg[1] == 0 ||
                msg[1] >= (uint32_t)world_size || seen[msg[1]]) {
                close(fd);  // not one of ours, or a duplicate rank: ignore it
                continue;
            }
            uint32_t size = (uint32_t)len;
            if (bs_io(fd, &size, sizeof(size), 1, &clock) != 0 || bs_io(fd, blob, len, 1, &clock) != 0) {
                llmc_die("bootstrap: sending to rank %u failed", msg[1]);
            }
            seen[msg[1]] = 1;
            joined++;
            close(fd);
        }
        free(seen);
        close(srv);
        return;
    }
    char portstr[16];
    snprintf(portstr, sizeof(portstr), "%d", port);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int gai = getaddrinfo(addr, portstr, &hints, &res);
    if (gai != 0) { llmc_die("bootstrap: cannot resolve rank 0's host '%s' (MASTER_ADDR or -ps): %s", addr, gai_strerror(gai)); }
    for (int done = 0; !done;) {
        for (struct addrinfo *ai = res; ai != NULL && !done; ai = ai->ai_next) {
            int fd = bs_connect(ai, &clock);
            if (fd < 0) { continue; }
            msg[0] = BOOTSTRAP_MAGIC;
            msg[1] = (uint32_t)rank;
            uint32_t size = 0;
            if (bs_io(fd, msg, sizeof(msg), 1, &clock) == 0 && bs_io(fd, &size, sizeof(size), 0, &clock) == 0) {
                if (size != (uint32_t)len) {
                    llmc_die("bootstrap: rank 0 sent a %u-byte id, expected %zu (different builds on the ranks?)", size, len);
                }
                if (bs_io(fd, blob, len, 0, &clock) == 0) { done = 1; }
            }
            close(fd);
        }
        if (!done && wait_clock_expired(&clock)) {
            llmc_die("bootstrap: could not get the NCCL id from rank 0 at %s:%d within %d s; is rank 0 running, and are "
                     "its host and port (MASTER_ADDR/MASTER_PORT, or -ps) right and reachable? (-pt sets the timeout)", addr, port, timeout_s);
        }
        if (!done) { usleep(100 * 1000); }  // rank 0 may not be listening yet
    }
    freeaddrinfo(res);
}

#endif  // LLMC_TCP_BROADCAST_H
