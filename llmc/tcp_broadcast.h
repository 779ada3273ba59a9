/*
 * TCP bootstrap: rank 0 sends a small blob (the NCCL unique id) to every other rank, for
 * launches without MPI (torchrun, SLURM without PMI). Host code, no CUDA, so it is tested on CPUs.
 *
 * Rank 0 listens on <port> and accepts world_size-1 connections; every other rank connects to
 * <addr>:<port> (retrying while rank 0 is not up yet), says its rank, world size and job, and
 * receives the blob, or why not (another world size, a rank taken, another job's rank 0).
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
#include <pthread.h>
#include <sys/socket.h>
#include "utils.h"

#define BOOTSTRAP_MAGIC 0x4c4c4d44u  // "LLMD": the handshake below
// the first version's magic, "LLMC", as its hello (magic and rank, in the sender's byte order) arrived from
// a little- or a big-endian host; it then waited for a 4-byte size and the blob
#define BOOTSTRAP_MAGIC_V1_LE 0x434d4c4cu
#define BOOTSTRAP_MAGIC_V1_BE 0x4c4c4d43u

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
    if (*end != '\0' || p <= 0 || p + base_plus > 65535) {
        llmc_die("%s=%s: %s must be a port in 1..65535; set a %s", base_plus ? "MASTER_PORT" : "LLMC_BOOTSTRAP_PORT", s,
                 base_plus ? "the bootstrap listens on MASTER_PORT + 1, which" : "it",
                 base_plus ? "lower MASTER_PORT or LLMC_BOOTSTRAP_PORT" : "port number");
    }
    return (int)p + base_plus;
}

/*
 * The handshake. A rank's hello: magic, its rank, its world size, the job's tag, a nonce (the same
 * process asking again after a broken transfer is not a second process of that rank). Rank 0's
 * answer: magic, a status, its world size, the blob's size; then the blob where the status is
 * BS_OK. The job's tag tells two jobs given one port apart (the launcher's job id; 0: none known).
 */
enum { BS_OK = 0, BS_WORLD = 1, BS_DUPLICATE = 2, BS_OTHER_JOB = 3 };
typedef struct { uint32_t magic, rank, world, tag, nonce; } BsHello;
typedef struct { uint32_t magic, status, world, size; } BsAnswer;
#define BS_HELLO_SECONDS 2.0  // a connection that says nothing for this long is not a rank: the next one is served

// the messages' fields in network byte order (hosts of either endianness)
static inline void bs_order(uint32_t *f, int n, int to_net) {
    for (int i = 0; i < n; i++) { f[i] = to_net ? htonl(f[i]) : ntohl(f[i]); }
}
static inline int bs_send(int fd, const void *msg, size_t len, WaitClock *clock) {
    uint32_t f[8];
    memcpy(f, msg, len);
    bs_order(f, (int)(len / 4), 1);
    return bs_io(fd, f, len, 1, clock);
}
static inline int bs_recv(int fd, void *msg, size_t len, WaitClock *clock) {
    if (bs_io(fd, msg, len, 0, clock) != 0) { return -1; }
    bs_order((uint32_t *)msg, (int)(len / 4), 0);
    return 0;
}

// the launcher's id of this job, and (var not NULL) the variable it came from ("" and 0 where none)
static inline uint32_t bootstrap_job_tag(const char **var) {
    static const char *vars[] = {"TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"};
    for (int i = 0; i < 2; i++) {
        const char *v = getenv(vars[i]);
        if (v && v[0]) {
            if (var) { *var = vars[i]; }
            return crc32_update(0, v, strlen(v)) | 1u;
        }
    }
    if (var) { *var = ""; }
    return 0;
}

static inline int bs_listen(int port) {
    int srv = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);  // held for the run (bs_linger): not by children
    int v6 = 1;
    if (srv < 0) { srv = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); v6 = 0; }
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
    if (rc != 0 || listen(srv, 128) != 0) {
        llmc_die("bootstrap: rank 0 cannot listen on port %d: %s; another rank 0 (of this job: two processes with rank 0, "
                 "or of another job) or another program holds it; pick a free port with LLMC_BOOTSTRAP_PORT", port,
                 strerror(errno));
    }
    return srv;
}

// a hello from fd within clock: 1 read, 0 none (silent, or not one of ours), -1 a rank of the
// first version, told an impossible id size so that it stops (the magic comes first: that hello is shorter)
static inline int bs_read_hello(int fd, BsHello *h, WaitClock *clock) {
    if (bs_recv(fd, &h->magic, sizeof(h->magic), clock) != 0) { return 0; }
    if (h->magic == BOOTSTRAP_MAGIC_V1_LE || h->magic == BOOTSTRAP_MAGIC_V1_BE) {
        uint32_t no_size = 0xffffffffu;  // what the old build's rank reads as the id's size
        bs_io(fd, &no_size, sizeof(no_size), 1, clock);
        return -1;
    }
    return h->magic == BOOTSTRAP_MAGIC && bs_recv(fd, &h->rank, sizeof(*h) - sizeof(h->magic), clock) == 0;
}

// rank 0's answer to hello h, given the ranks that joined so far (seen) and their processes' nonces
static inline uint32_t bs_status(const BsHello *h, uint32_t tag, int world_size, const char *seen, const uint32_t *nonce) {
    if (h->tag != tag) { return BS_OTHER_JOB; }
    if (h->world != (uint32_t)world_size || h->rank < 1 || h->rank >= (uint32_t)world_size) { return BS_WORLD; }
    if (seen[h->rank] && nonce[h->rank] != h->nonce) { return BS_DUPLICATE; }
    return BS_OK;
}

// the answer, and the blob after BS_OK; 0 when all of it was sent
static inline int bs_answer(int fd, uint32_t status, int world_size, const void *blob, size_t len, WaitClock *clock) {
    BsAnswer ans = {BOOTSTRAP_MAGIC, status, (uint32_t)world_size, (uint32_t)len};
    if (bs_send(fd, &ans, sizeof(ans), clock) != 0) { return -1; }
    return status == BS_OK ? bs_io(fd, (void *)blob, len, 1, clock) : 0;
}

// rank 0 after every rank joined, for the rest of its run: a process that comes late (a rank given
// twice, another world size, an older build) hears at once why it cannot join, and stops, instead of
// waiting -pt for a rank 0 that no longer listens; the same process asking again gets the blob again
typedef struct { int srv, world_size; uint32_t tag; char *seen; uint32_t *nonce; void *blob; size_t len; int told; } BsLinger;
#define BS_LATE_WARNINGS 3  // a process restarted in a loop must not fill rank 0's log

// one late process, connected on fd (closed here): its hello heard and answered
static void bs_linger_answer(BsLinger *g, int fd) {
    WaitClock clock = wait_clock_start(BS_HELLO_SECONDS);
    BsHello h;
    const int heard = bs_read_hello(fd, &h, &clock);
    const uint32_t status = heard == 1 ? bs_status(&h, g->tag, g->world_size, g->seen, g->nonce) : BS_OK;
    const int answered = heard == 1 && bs_answer(fd, status, g->world_size, g->blob, g->len, &clock) == 0;
    close(fd);
    if ((heard < 0 || (answered && (status == BS_WORLD || status == BS_DUPLICATE))) && g->told++ < BS_LATE_WARNINGS) {
        llmc_warn("bootstrap: after all %d ranks joined, a process %s came and was told to stop; the run goes on%s",
                  g->world_size, heard < 0 ? "of an older build of this trainer" :
                  status == BS_WORLD ? "of another world size" : "with a rank already taken",
                  g->told == BS_LATE_WARNINGS ? " (later ones are not reported)" : "");
    }
}

static void bs_linger_free(BsLinger *g) {
    close(g->srv);
    free(g->blob); free(g->seen); free(g->nonce); free(g);
}

static void *bs_linger(void *arg) {
    BsLinger *g = (BsLinger *)arg;
    for (;;) {
        int fd = accept(g->srv, NULL, NULL);
        if (fd >= 0) {
            bs_linger_answer(g, fd);
        } else if (errno != EINTR && errno != ECONNABORTED) {
            usleep(100 * 1000);  // out of descriptors: later
        }
    }
    return NULL;
}

// rank 0: the blob to every other rank; a rank of another world size, or a second process of one
// rank, ends the launch at once (both sides say why); another job's rank is told and turned away
static inline void bs_serve(void *blob, size_t len, int world_size, int port, int timeout_s, WaitClock *clock) {
    int srv = bs_listen(port);
    const uint32_t tag = bootstrap_job_tag(NULL);
    char *seen = (char *)callocCheck(world_size, 1);
    uint32_t *nonce = (uint32_t *)callocCheck(world_size, sizeof(uint32_t));
    int joined = 1;
    while (joined < world_size) {
        if (bs_wait(srv, POLLIN, clock) != 1) {
            char missing[256];
            missing_ranks_list(missing, sizeof(missing), seen, world_size);
            // SLURM's ranks with no other rank at all: most likely an sbatch script's own process, where
            // SLURM_NTASKS is the job's (its tasks are started by srun)
            const int slurm_alone = joined == 1 && getenv("SLURM_PROCID") && !getenv("RANK");
            llmc_die("bootstrap: only %d of %d ranks reached rank 0 on port %d within %d s (missing: %s); did they all "
                     "start, with the same MASTER_ADDR/MASTER_PORT or -ps? (-pt sets the timeout)%s", joined, world_size, port,
                     timeout_s, missing, slurm_alone ? "; run from an sbatch script itself, outside srun, SLURM_NTASKS is "
                     "the job's: start the trainer with srun, or unset SLURM_NTASKS for one process" : "");
        }
        int fd = accept(srv, NULL, NULL);
        if (fd < 0) { continue; }
        BsHello h;
        const double budget = clock->left < BS_HELLO_SECONDS ? clock->left : BS_HELLO_SECONDS;
        WaitClock hello = wait_clock_start(budget);
        const int heard = bs_read_hello(fd, &h, &hello);
        clock->left -= budget - hello.left;  // the hello's wait counts against the launch's
        clock->last = hello.last;
        if (heard < 0) {
            llmc_die("bootstrap: a process of an older build of this trainer connected (its handshake is the first "
                     "version's): run the same build on every node");
        }
        if (!heard) {
            close(fd);  // silent, or not one of ours
            continue;
        }
        const uint32_t status = bs_status(&h, tag, world_size, seen, nonce);
        const int sent = bs_answer(fd, status, world_size, blob, len, clock) == 0;
        close(fd);
        if (status == BS_WORLD) {
            llmc_die("bootstrap: a process says it is rank %u of %u, but this rank 0 has %d processes: every process needs "
                     "the same world size (WORLD_SIZE, SLURM_NTASKS or -pn) and its own rank below it", h.rank, h.world,
                     world_size);
        }
        if (status == BS_DUPLICATE) {
            llmc_die("bootstrap: two processes say they are rank %u: give each process its own rank (RANK, SLURM_PROCID "
                     "or -pr)", h.rank);
        }
        if (status == BS_OK && sent && !seen[h.rank]) {
            seen[h.rank] = 1;
            nonce[h.rank] = h.nonce;
            joined++;
        }
    }
    BsLinger *g = (BsLinger *)mallocCheck(sizeof(BsLinger));  // the thread's for the rest of the process
    g->srv = srv; g->world_size = world_size; g->tag = tag; g->seen = seen; g->nonce = nonce; g->len = len; g->told = 0;
    g->blob = mallocCheck(len);
    memcpy(g->blob, blob, len);
    pthread_t t;
    if (pthread_create(&t, NULL, bs_linger, g) == 0) {
        pthread_detach(t);
    } else {  // late processes then wait -pt, as without it
        bs_linger_free(g);
    }
}

// this process's nonce: its host, pid and start time (another process of the same rank differs
// in one of them, also in containers that give every host's process the same pid)
static inline uint32_t bs_nonce(void) {
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    const uint64_t t = (uint64_t)(llmc_wall_seconds() * 1e6);
    const pid_t pid = getpid();
    uint32_t crc = crc32_update(0, host, strlen(host));
    crc = crc32_update(crc, &pid, sizeof(pid));
    return crc32_update(crc, &t, sizeof(t));
}

// the outcome of one try to reach rank 0: 1 with the blob, 0 to try again; dies on an answer that
// says this launch cannot work. *silent: a connection never answered; *closed: connections closed on
// the hello without an answer, which a rank 0 of this build never does (an older build does, and so
// does a forwarder, ssh -L or a container's port, whose rank 0 is not listening yet: so not fatal)
static inline int bs_ask(const struct addrinfo *ai, void *blob, size_t len, const BsHello *h, const char *addr, int port,
                         WaitClock *clock, int *silent, int *closed) {
    int fd = bs_connect(ai, clock);
    if (fd < 0) { return 0; }
    BsAnswer ans;
    int got = 0;
    if (bs_send(fd, h, sizeof(*h), clock) == 0) {
        if (bs_recv(fd, &ans, sizeof(ans), clock) != 0) {
            *silent = wait_clock_expired(clock);  // connected, and no answer came
            if (!*silent) { (*closed)++; }
            close(fd);
            return 0;
        }
        if (ans.magic != BOOTSTRAP_MAGIC) {
            llmc_die("bootstrap: the program that answers at %s:%d is not rank 0 of this trainer; another program holds "
                     "that port: pick a free one with LLMC_BOOTSTRAP_PORT (the same on every rank)", addr, port);
        } else if (ans.status == BS_OTHER_JOB) {
            const char *var;
            bootstrap_job_tag(&var);
            llmc_die("bootstrap: rank 0 at %s:%d belongs to another job (%s differs): two jobs share the port; give each "
                     "job its own MASTER_PORT or LLMC_BOOTSTRAP_PORT", addr, port, var[0] ? var : "its job id");
        } else if (ans.status == BS_WORLD) {
            llmc_die("bootstrap: rank 0 at %s:%d has %u processes, this process says %u (rank %u): every process needs the "
                     "same world size (WORLD_SIZE, SLURM_NTASKS or -pn)", addr, port, ans.world, h->world, h->rank);
        } else if (ans.status == BS_DUPLICATE) {
            llmc_die("bootstrap: rank 0 at %s:%d already has a rank %u: give each process its own rank (RANK, "
                     "SLURM_PROCID or -pr)", addr, port, h->rank);
        } else if (ans.status != BS_OK) {  // a later build's answer: this one cannot tell what it means
            llmc_die("bootstrap: rank 0 at %s:%d answered with status %u, which this build does not know (different "
                     "builds on the ranks? run the same build on every node)", addr, port, ans.status);
        } else if (ans.size != (uint32_t)len) {
            llmc_die("bootstrap: rank 0 sent a %u-byte id, expected %zu (different builds on the ranks?)", ans.size, len);
        } else {
            got = bs_io(fd, blob, len, 0, clock) == 0;
        }
    }
    close(fd);
    return got;
}

/*
 * Broadcast `len` bytes from rank 0 to all ranks over TCP. addr: rank 0's host (MASTER_ADDR).
 * Dies with a message naming the problem if it does not complete within timeout_s seconds.
 */
static inline void bootstrap_tcp_bcast(void *blob, size_t len, int rank, int world_size, const char *addr, int port,
                                       int timeout_s) {
    WaitClock clock = wait_clock_start(timeout_s);
    if (rank == 0) {
        bs_serve(blob, len, world_size, port, timeout_s, &clock);
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
    BsHello h = {BOOTSTRAP_MAGIC, (uint32_t)rank, (uint32_t)world_size, bootstrap_job_tag(NULL), bs_nonce()};
    int silent = 0, closed = 0;
    for (int done = 0; !done;) {
        silent = 0;  // of this round's tries
        for (struct addrinfo *ai = res; ai != NULL && !done; ai = ai->ai_next) {
            done = bs_ask(ai, blob, len, &h, addr, port, &clock, &silent, &closed);
        }
        if (!done && wait_clock_expired(&clock)) {
            char why[320];
            snprintf(why, sizeof(why), "the port closed this rank's hello %d times without an answer: rank 0 is an older "
                     "build of this trainer (run the same build on every node), or a forwarder's target never listened",
                     closed);
            llmc_die("bootstrap: could not get the NCCL id from rank 0 at %s:%d within %d s; %s (-pt sets the timeout)", addr,
                     port, timeout_s, silent ? "a program there took the connection and never answered: rank 0 stopped, "
                     "or another program on that port (LLMC_BOOTSTRAP_PORT picks another)" : closed ? why : "is rank 0 "
                     "running, and are its host and port (MASTER_ADDR/MASTER_PORT, or -ps) right and reachable?");
        }
        if (!done) { usleep(100 * 1000); }  // rank 0 may not be listening yet
    }
    freeaddrinfo(res);
}

#endif  // LLMC_TCP_BROADCAST_H
