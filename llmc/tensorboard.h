/*
 * TensorBoard's event file (-tb 1), written from its published formats, without a protobuf library.
 *
 * - The file is a TFRecord stream. A record: the data's length (uint64, little-endian), the
 *   masked CRC-32C of those 8 bytes (uint32), the data, the masked CRC-32C of the data. CRC-32C is
 *   the Castagnoli CRC (reflected polynomial 0x82F63B78); masked: ((crc >> 15) | (crc << 17)) +
 *   0xa282ead8.
 * - The data of a record is a protobuf Event (tensorboard/compat/proto/event.proto): wall_time = 1
 *   (double, seconds since the epoch), step = 2 (int64), and one of file_version = 3 (string; the
 *   first record of a file: "brain.Event:2"), summary = 5 (Summary: repeated Value value = 1; a
 *   Value: tag = 1 (string), simple_value = 2 (float)), session_log = 7 (SessionLog: status = 1,
 *   START = 1). Protobuf's wire format: a key varint (field << 3 | wire type), then a varint
 *   (type 0), 8 bytes (type 1), a length varint and bytes (type 2) or 4 bytes (type 5), little-endian.
 * - A resumed run writes a new file (TensorBoard reads every events file of a folder in name order)
 *   that starts, after the version, with a SessionLog START at the resume step: readers (TensorBoard's
 *   EventAccumulator) then drop what the interrupted run logged from that step on, so the last value
 *   of a step wins, as in main.log.
 * Every record goes out with one fwrite and a flush, so an interrupted run leaves whole records and
 * at most a partial last one, which readers skip. A failed write ends the file (llmc/logger.h).
 */
#ifndef LLMC_TENSORBOARD_H
#define LLMC_TENSORBOARD_H

#include <sys/time.h>
#include "utils.h"

typedef struct {
    FILE *fp;  // NULL: off
    char path[4096];
} TbWriter;

// CRC-32C, a byte at a time through a table built on the first call
static inline uint32_t crc32c_update(uint32_t crc, const void *data, size_t n) {
    static uint32_t table[256];
    static int ready = 0;
    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) { c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1; }
            table[i] = c;
        }
        ready = 1;
    }
    const unsigned char *p = (const unsigned char *)data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) { crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8); }
    return ~crc;
}

static inline uint32_t tb_masked_crc(const void *data, size_t n) {
    uint32_t crc = crc32c_update(0, data, n);
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

// ---- protobuf encoding into a fixed buffer (an Event here is a few hundred bytes)
typedef struct {
    unsigned char b[4096];
    size_t n;
} PbBuf;

static inline void pb_bytes(PbBuf *o, const void *p, size_t n) {
    if (o->n + n > sizeof(o->b)) { llmc_die("internal: a TensorBoard event over %zu bytes", sizeof(o->b)); }
    memcpy(o->b + o->n, p, n);
    o->n += n;
}

static inline void pb_varint(PbBuf *o, uint64_t v) {
    unsigned char tmp[10];
    size_t n = 0;
    do {
        tmp[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    pb_bytes(o, tmp, n);
}

static inline void pb_key(PbBuf *o, int field, int wire) { pb_varint(o, (uint64_t)field << 3 | (uint64_t)wire); }

// little-endian fixed-width values (the machines this runs on are little-endian; the file must be)
static inline void pb_fixed(PbBuf *o, const void *v, size_t n) {
    unsigned char le[8];
    uint64_t x = 0;
    memcpy(&x, v, n);
    for (size_t i = 0; i < n; i++) { le[i] = (unsigned char)(x >> (8 * i)); }
    pb_bytes(o, le, n);
}

// a length-delimited field holding `inner`
static inline void pb_message(PbBuf *o, int field, const PbBuf *inner) {
    pb_key(o, field, 2);
    pb_varint(o, inner->n);
    pb_bytes(o, inner->b, inner->n);
}

static inline double tb_now(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec * 1e-6;
}

// an Event's wall_time and step
static inline void tb_event_head(PbBuf *e, long long step) {
    double t = tb_now();
    pb_key(e, 1, 1);
    pb_fixed(e, &t, 8);
    pb_key(e, 2, 0);
    pb_varint(e, (uint64_t)step);
}

// one record: the Event in e
static inline void tb_write_record(TbWriter *w, const PbBuf *e) {
    unsigned char rec[sizeof(e->b) + 16];
    uint64_t len = e->n;
    for (int i = 0; i < 8; i++) { rec[i] = (unsigned char)(len >> (8 * i)); }
    uint32_t c = tb_masked_crc(rec, 8);
    for (int i = 0; i < 4; i++) { rec[8 + i] = (unsigned char)(c >> (8 * i)); }
    memcpy(rec + 12, e->b, e->n);
    c = tb_masked_crc(e->b, e->n);
    for (int i = 0; i < 4; i++) { rec[12 + e->n + i] = (unsigned char)(c >> (8 * i)); }
    // a failed write (a full disk) shows in the stream's error state: the logger checks it (logger.h)
    if (fwrite(rec, 1, 16 + e->n, w->fp) == 16 + e->n) { fflush(w->fp); }
}

// a SessionLog START at `step`: readers drop the values logged before it for steps from `step` on
// (a resume, or a rollback to the checkpoint of that step)
static inline void tb_session_start(TbWriter *w, long long step) {
    if (w->fp == NULL) { return; }
    PbBuf log, ev;
    log.n = 0;
    ev.n = 0;
    pb_key(&log, 1, 0);
    pb_varint(&log, 1);  // SessionLog.START
    tb_event_head(&ev, step);
    pb_message(&ev, 7, &log);
    tb_write_record(w, &ev);
}

/*
 * A new events file in dir: events.out.tfevents.<seconds>.<host>, with ".1", ".2", ... added if that
 * name is taken (a resume within the same second). resume_step >= 0: a resumed run, whose earlier
 * values from that step on are to be dropped (the SessionLog START above).
 */
static inline void tb_open(TbWriter *w, const char *dir, long long resume_step) {
    char host[256];
    llmc_hostname(host, sizeof(host), "localhost");
    const long long t = (long long)tb_now();
    int fd = -1;
    for (int k = 0; fd < 0 && k < 1000; k++) {
        if (k == 0) { snprintf(w->path, sizeof(w->path), "%s/events.out.tfevents.%lld.%s", dir, t, host); }
        else { snprintf(w->path, sizeof(w->path), "%s/events.out.tfevents.%lld.%s.%d", dir, t, host, k); }
        fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0 && errno != EEXIST) { llmc_die("-tb 1: cannot create '%s': %s", w->path, strerror(errno)); }
    }
    if (fd < 0) { llmc_die("-tb 1: no free events file name in %s", dir); }
    w->fp = fdopen(fd, "wb");
    if (w->fp == NULL) { llmc_die("-tb 1: cannot open '%s': %s", w->path, strerror(errno)); }
    PbBuf e;
    e.n = 0;
    tb_event_head(&e, 0);
    static const char version[] = "brain.Event:2";
    pb_key(&e, 3, 2);
    pb_varint(&e, sizeof(version) - 1);
    pb_bytes(&e, version, sizeof(version) - 1);
    tb_write_record(w, &e);
    if (resume_step >= 0) { tb_session_start(w, resume_step); }
}

// one Event at `step` with a scalar per tag
static inline void tb_scalars(TbWriter *w, long long step, const char *const *tags, const float *values, int n) {
    if (w->fp == NULL || n == 0) { return; }
    PbBuf summary, e;
    summary.n = 0;
    e.n = 0;
    for (int i = 0; i < n; i++) {
        PbBuf v;
        v.n = 0;
        pb_key(&v, 1, 2);
        pb_varint(&v, strlen(tags[i]));
        pb_bytes(&v, tags[i], strlen(tags[i]));
        pb_key(&v, 2, 5);
        pb_fixed(&v, &values[i], 4);
        pb_message(&summary, 1, &v);
    }
    tb_event_head(&e, step);
    pb_message(&e, 5, &summary);
    tb_write_record(w, &e);
}

#endif  // LLMC_TENSORBOARD_H
