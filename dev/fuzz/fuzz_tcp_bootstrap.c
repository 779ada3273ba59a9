// libFuzzer harness: the TCP bootstrap (llmc/tcp_broadcast.h: launches without MPI, -pi tcp), whose
// readers take what arrives on a socket from any process that connects: rank 0 reads each
// connection's hello, every other rank reads rank 0's answer and the blob. The harness plays the
// other side over loopback.
//
// Input: byte 0: world size 2..9; byte 1: the rank that runs (mod the world size); then one record
// per connection, [u16 little-endian: bit 15 keeps the connection open after its bytes (a peer that
// goes silent), bits 0..14 the length][bytes]. Rank 0: each record is a process that connects and
// sends those bytes (all of them connect before rank 0 accepts the first). A rank r > 0: its k-th
// connection to rank 0 is answered with record k's bytes; after the last record the port refuses.
//
// Time is virtual: a wait that finds nothing ready moves the clock on by its timeout at once, and
// the retry's sleep by its length, so the 5 s deadline and the 2 s hello budget pass without sleeping.
// Rank 0's thread for late processes is not started: once the launch completed, the harness answers
// the connections still waiting as that thread does (bs_linger_answer), then frees what it holds.
//
// Checks beyond no sanitizer report: every answer rank 0 gives has its magic, world size and one of
// the four statuses, the status the hello calls for (another job's tag; another world size or a rank
// outside it), and the whole blob exactly when it is OK; rank 0 completes only when every rank
// 1..W-1 got an OK and the blob, and never after telling a process to stop (late processes may be
// told, and the thread that answers them never stops the run). A rank r > 0 introduces
// itself with its rank, world size and job on every connection, with one nonce; it completes only on
// an answer that is OK, of this build's magic and blob size, and then holds that answer's blob.
#include <time.h>

static long long fuzz_virtual_ns;  // added to every clock reading (llmc_wall_seconds, utils.h)
static int fuzz_clock_gettime(clockid_t id, struct timespec *ts) {
    const int rc = clock_gettime(id, ts);
    const long long ns = (long long)ts->tv_nsec + fuzz_virtual_ns % 1000000000LL;
    ts->tv_sec += (time_t)(fuzz_virtual_ns / 1000000000LL + ns / 1000000000LL);
    ts->tv_nsec = (long)(ns % 1000000000LL);
    return rc;
}
#define clock_gettime(id, ts) fuzz_clock_gettime(id, ts)

#include "fuzz.h"
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>

#define BLOB_LEN 128  // an NCCL id's size
#define MAX_CONNS 64  // under bs_listen's backlog: rank 0's peers all connect before the first accept
#define MAX_RECORD 2048

typedef struct {
    const uint8_t *bytes;
    size_t len;
    int keep_open;
} Record;

static Record records[MAX_CONNS];
static int nrecords, next_record;
static int serving;                   // 1: rank 0 runs (the records connect to it); 0: a rank asks the harness
static int peers[MAX_CONNS], npeers;  // the harness's end of each connection
static int harness_port;              // where the harness listens as rank 0, for a rank r > 0

// ----------------------------------------------------------------------------
// the other side, with the real calls (before the macros below)

// (libFuzzer's timer signal interrupts blocking calls: EINTR is retried)
static void peer_send(int fd, const Record *r) {
    for (size_t at = 0; at < r->len;) {
        const ssize_t n = send(fd, r->bytes + at, r->len - at, MSG_NOSIGNAL);
        if (n < 0 && errno != EINTR) { fuzz_fail("peer send: %s", strerror(errno)); }
        at += n > 0 ? (size_t)n : 0;
    }
    if (!r->keep_open) { shutdown(fd, SHUT_WR); }
    peers[npeers++] = fd;
}

static struct sockaddr_in loopback(int port) {
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((uint16_t)port);
    return sa;
}

// rank 0's listen: then every record connects (the kernel completes loopback connections into the
// backlog) and sends its bytes
static int fuzz_listen(int fd, int backlog) {
    const int rc = listen(fd, backlog);
    if (rc != 0 || !serving) { return rc; }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) { fuzz_fail("getsockname: %s", strerror(errno)); }
    const int port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port : ((struct sockaddr_in *)&ss)->sin_port);
    for (int i = 0; i < nrecords; i++) {
        struct sockaddr_in sa = loopback(port);
        const int s = socket(AF_INET, SOCK_STREAM, 0);
        int err = 0;
        socklen_t el = sizeof(err);
        if (s < 0 || (connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0 && errno != EINTR)) { fuzz_fail("peer connect: %s", strerror(errno)); }
        struct pollfd p = {s, POLLOUT, 0};  // an interrupted connect goes on: wait for it
        while (poll(&p, 1, 1000) < 0 && errno == EINTR) {}
        if (getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) { fuzz_fail("peer connect: %s", strerror(err)); }
        peer_send(s, &records[i]);
    }
    return rc;
}

// the harness's own port, where a rank r > 0 finds "rank 0" (made once)
static int fuzz_listener_fd(void) {
    static int fd = -1;
    if (fd >= 0) { return fd; }
    struct sockaddr_in sa = loopback(0);
    socklen_t sl = sizeof(sa);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(s, 16) != 0 ||
        getsockname(s, (struct sockaddr *)&sa, &sl) != 0) {
        fuzz_fail("the harness cannot listen on loopback: %s", strerror(errno));
    }
    harness_port = ntohs(sa.sin_port);
    return fd = s;
}

// a rank's connection to rank 0: the harness accepts it and answers with the next record
static int fuzz_connect(int fd, const struct sockaddr *addr, socklen_t len) {
    if (next_record == nrecords) {
        errno = ECONNREFUSED;
        return -1;
    }
    const int rc = connect(fd, addr, len), err = errno;
    if (rc != 0 && err != EINPROGRESS) { fuzz_fail("connect to the harness: %s", strerror(err)); }
    int s;
    while ((s = accept(fuzz_listener_fd(), NULL, NULL)) < 0 && errno == EINTR) {}
    if (s < 0) { fuzz_fail("accept: %s", strerror(errno)); }
    peer_send(s, &records[next_record++]);
    errno = err;
    return rc;
}

// nothing ready: the wait's time passes at once
static int fuzz_poll(struct pollfd *p, nfds_t n, int ms) {
    const int r = poll(p, n, 0);
    if (r == 0) { fuzz_virtual_ns += (long long)ms * 1000000LL; }
    return r;
}
static int fuzz_usleep(useconds_t us) {
    fuzz_virtual_ns += (long long)us * 1000LL;
    return 0;
}

// the code under test's sockets go into the ledger (released after a rejection)
static int fuzz_socket(int domain, int type, int protocol) { return fuzz_fd_put(socket(domain, type, protocol)); }
static int accepted;  // connections the code under test accepted
static int fuzz_accept(int fd, struct sockaddr *addr, socklen_t *len) {
    const int s = accept(fd, addr, len);
    accepted += s >= 0;
    return fuzz_fd_put(s);
}
// rank 0's thread for late processes is not started: the harness keeps its argument and answers the
// connections still waiting after the launch, one by one as the thread would (bs_linger_answer)
static void *lingering;  // the BsLinger of a completed rank 0
static int fuzz_thread(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
    (void)t; (void)attr; (void)fn;
    lingering = arg;
    return 0;
}
static int fuzz_detach(pthread_t t) { (void)t; return 0; }
// at most one result outstanding: a rejection leaves it, the next lookup frees it
static struct addrinfo *fuzz_addrinfo;
static int fuzz_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **res) {
    if (fuzz_addrinfo) { freeaddrinfo(fuzz_addrinfo); }
    const int rc = getaddrinfo(node, service, hints, res);
    fuzz_addrinfo = rc == 0 ? *res : NULL;
    return rc;
}
static void fuzz_freeaddrinfo(struct addrinfo *ai) {
    if (ai == fuzz_addrinfo) { fuzz_addrinfo = NULL; }
    freeaddrinfo(ai);
}

#define listen(fd, n) fuzz_listen(fd, n)
#define connect(fd, a, l) fuzz_connect(fd, a, l)
#define poll(p, n, ms) fuzz_poll(p, n, ms)
#define usleep(us) fuzz_usleep(us)
#define socket(d, t, p) fuzz_socket(d, t, p)
#define accept(fd, a, l) fuzz_accept(fd, a, l)
#define pthread_create(t, a, f, g) fuzz_thread(t, a, f, g)
#define pthread_detach(t) fuzz_detach(t)
#define getaddrinfo(n, s, h, r) fuzz_getaddrinfo(n, s, h, r)
#define freeaddrinfo(ai) fuzz_freeaddrinfo(ai)
#include "../../llmc/tcp_broadcast.h"

// ----------------------------------------------------------------------------

typedef struct {
    int rank, world;
    unsigned char blob[BLOB_LEN];
} TcpCase;

static void run_bootstrap(void *arg) {
    TcpCase *c = (TcpCase *)arg;
    bootstrap_tcp_bcast(c->blob, BLOB_LEN, c->rank, c->world, "127.0.0.1", c->rank == 0 ? 0 : harness_port, 5);
}

// what came to the harness's end of connection i (all of it is there: loopback, and the bootstrap has returned)
static size_t peer_received(int i, uint8_t *buf, size_t cap) {
    size_t n = 0;
    for (ssize_t r; n < cap && (r = recv(peers[i], buf + n, cap - n, MSG_DONTWAIT)) > 0;) { n += (size_t)r; }
    return n;
}

// n 32-bit fields in network byte order
static void fields(const uint8_t *bytes, uint32_t *f, int n) {
    memcpy(f, bytes, 4 * (size_t)n);
    for (int i = 0; i < n; i++) { f[i] = ntohl(f[i]); }
}

static int blob_byte(int i) { return (i * 37 + 11) & 0xff; }

// rank 0: the answer on each connection, and whether every rank got the blob in the launch (its first
// `launch` connections; the rest were answered as late processes, who may be told to stop)
static void check_rank0(const TcpCase *c, int completed, int launch) {
    const uint32_t tag = bootstrap_job_tag(NULL);
    int served[16] = {0}, stopped = 0;
    for (int i = 0; i < npeers; i++) {
        uint8_t rx[16 + BLOB_LEN + 1];
        const size_t n = peer_received(i, rx, sizeof(rx));
        uint32_t h[5], a[4];
        if (n == 0) { continue; }  // not accepted, or closed without an answer
        if (records[i].len < 4) { fuzz_fail("connection %d: %zu bytes answered to %zu", i, n, records[i].len); }
        fields(records[i].bytes, h, 1);
        if (h[0] == BOOTSTRAP_MAGIC_V1_LE || h[0] == BOOTSTRAP_MAGIC_V1_BE) {
            if (n != 4 || memcmp(rx, "\xff\xff\xff\xff", 4) != 0) { fuzz_fail("connection %d: a first-version hello got %zu bytes, not the impossible size", i, n); }
            stopped |= i < launch;
            continue;
        }
        if (h[0] != BOOTSTRAP_MAGIC || records[i].len < sizeof(BsHello)) { fuzz_fail("connection %d: %zu bytes answered to no hello", i, n); }
        fields(records[i].bytes, h, 5);
        if (n < sizeof(BsAnswer)) { fuzz_fail("connection %d: a cut answer (%zu bytes)", i, n); }
        fields(rx, a, 4);
        if (a[0] != BOOTSTRAP_MAGIC || a[2] != (uint32_t)c->world || a[3] != BLOB_LEN) { fuzz_fail("connection %d: a wrong answer header", i); }
        const uint32_t want = h[3] != tag ? BS_OTHER_JOB : h[2] != (uint32_t)c->world || h[1] < 1 || h[1] >= (uint32_t)c->world ? BS_WORLD : a[1] == BS_DUPLICATE ? BS_DUPLICATE : BS_OK;
        if (a[1] != want) { fuzz_fail("connection %d: status %u, the hello calls for %u", i, a[1], want); }
        if (n != sizeof(BsAnswer) + (a[1] == BS_OK ? BLOB_LEN : 0)) { fuzz_fail("connection %d: %zu bytes for status %u", i, n, a[1]); }
        if (a[1] == BS_OK) {
            for (int k = 0; k < BLOB_LEN; k++) {
                if (rx[sizeof(BsAnswer) + k] != blob_byte(k)) { fuzz_fail("connection %d: the blob differs at byte %d", i, k); }
            }
            served[h[1]] |= i < launch;
        }
        stopped |= i < launch && (a[1] == BS_WORLD || a[1] == BS_DUPLICATE);
    }
    if (!completed) { return; }
    if (stopped) { fuzz_fail("rank 0 completed after telling a process to stop"); }
    for (int r = 1; r < c->world; r++) {
        if (!served[r]) { fuzz_fail("rank 0 completed, but rank %d never got the blob", r); }
    }
}

// a rank r > 0: its hellos, and the answer it completed on
static void check_rank(const TcpCase *c, int completed) {
    uint32_t nonce = 0;
    for (int i = 0; i < npeers; i++) {
        uint8_t rx[sizeof(BsHello) + 1];
        uint32_t h[5];
        const size_t n = peer_received(i, rx, sizeof(rx));
        if (n == 0) { continue; }  // the deadline passed before the hello went out
        if (n != sizeof(BsHello)) { fuzz_fail("connection %d: %zu bytes, not one hello", i, n); }
        fields(rx, h, 5);
        if (h[0] != BOOTSTRAP_MAGIC || h[1] != (uint32_t)c->rank || h[2] != (uint32_t)c->world || h[3] != bootstrap_job_tag(NULL) ||
            (i > 0 && h[4] != nonce)) {
            fuzz_fail("connection %d: a hello that is not rank %d's of %d", i, c->rank, c->world);
        }
        nonce = h[4];
    }
    if (!completed) { return; }
    const Record *r = &records[next_record - 1];
    uint32_t a[4];
    if (r->len < sizeof(BsAnswer) + BLOB_LEN) { fuzz_fail("completed on a %zu-byte answer", r->len); }
    fields(r->bytes, a, 4);
    if (a[0] != BOOTSTRAP_MAGIC || a[1] != BS_OK || a[3] != BLOB_LEN) { fuzz_fail("completed on answer magic %x status %u size %u", a[0], a[1], a[3]); }
    if (memcmp(c->blob, r->bytes + sizeof(BsAnswer), BLOB_LEN) != 0) { fuzz_fail("the blob is not the answer's"); }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    unsetenv("TORCHELASTIC_RUN_ID");  // the job's tag: 0, the same for every input
    unsetenv("SLURM_JOB_ID");
    fuzz_listener_fd();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) { return 0; }
    TcpCase c;
    c.world = 2 + data[0] % 8;
    c.rank = data[1] % c.world;
    nrecords = next_record = npeers = 0;
    for (size_t at = 2; at + 2 <= size && nrecords < MAX_CONNS;) {
        const unsigned v = (unsigned)data[at] | (unsigned)data[at + 1] << 8;
        size_t n = v & 0x7fff;
        at += 2;
        if (n > size - at) { n = size - at; }
        if (n > MAX_RECORD) { n = MAX_RECORD; }
        records[nrecords++] = (Record){data + at, n, (v & 0x8000) != 0};
        at += n;
    }
    for (int i = 0; i < BLOB_LEN; i++) { c.blob[i] = (unsigned char)(c.rank == 0 ? blob_byte(i) : 0); }
    serving = c.rank == 0;
    accepted = 0;
    lingering = NULL;
    const int completed = fuzz_call(run_bootstrap, &c), launch = accepted;
    if (lingering) {  // the connections still waiting: late processes (llmc_die here would end the run: a finding)
        BsLinger *g = (BsLinger *)lingering;
        struct pollfd p = {g->srv, POLLIN, 0};
        for (int fd; poll(&p, 1, 0) == 1 && (fd = accept(g->srv, NULL, NULL)) >= 0;) { bs_linger_answer(g, fd); }
        bs_linger_free(g);
    }
    if (c.rank == 0) { check_rank0(&c, completed, launch); } else { check_rank(&c, completed); }
    for (int i = 0; i < npeers; i++) { close(peers[i]); }
    if (completed) { fuzz_end(); }
    return 0;
}
