/*
 * Host simulator, streams and events: the order in which the work of several CUDA streams runs,
 * so that a missing event wait between two streams changes results, as it can on a GPU.
 *
 * Model:
 * - The legacy default stream (0) runs its work at once, after everything queued on the other
 *   streams (it synchronizes with them): the workbenches, which use only stream 0, run as before.
 * - A created stream (cudaStreamCreate*) queues its work: kernel launches, cuBLASLt products,
 *   asynchronous copies and sets, event records, waits for events, host functions, NCCL calls.
 *   Nothing queued runs until the host needs it: a synchronize, an event query, a copy into
 *   pageable memory, a synchronous copy or set, work on stream 0, cudaFree.
 * - Then the scheduler runs queued operations one at a time, taking the streams in turn (round
 *   robin, in creation order) and skipping a stream whose next operation is a wait that is not yet
 *   satisfied (a wait is satisfied once the event's record that it waits for has run). So a stream
 *   that should wait for another but does not runs ahead of it: its work starts before the other
 *   stream's earlier queued work has run.
 * - A host function (cudaLaunchHostFunc) is slow work: its stream resumes only when no other
 *   stream can run. llmc/cuda/processes.cuh's debug mode (LLMC_NCCL_DEBUG) uses one as its wait between
 *   changing the data and restoring it, so any stream that does not wait for the NCCL stream sees
 *   the changed data.
 * - A state in which the host waits for something no stream can reach is an error (a deadlock on
 *   a GPU), and the program stops.
 * An event's time is the host's clock when its record runs (cudaEventElapsedTime).
 */
#ifndef SIM_STREAMS_H
#define SIM_STREAMS_H

#include <deque>
#include <functional>
#include <vector>

#include "engine.h"

struct SimEvent {
    uint64_t recorded = 0;  // id of its last record issued (0: never recorded)
    uint64_t reached = 0;   // id of the last of its records that has run
    bool timing = true;     // not created with cudaEventDisableTiming
    double ms = 0.0;        // host time at which its last record ran
};

struct SimStream {
    enum Kind { WORK, HOST, RECORD, WAIT };
    struct Op {
        Kind kind;
        std::function<void()> run;  // WORK, HOST
        SimEvent *event;            // RECORD, WAIT
        uint64_t id;                // RECORD: this record's id; WAIT: the record waited for
    };
    std::deque<Op> ops;
    int priority = 0;
    unsigned int flags = 0;
};

namespace sim {

static inline double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static std::vector<SimStream *> streams;  // created and not destroyed, in creation order
static uint64_t event_serial = 0;
static size_t stream_turn = 0;            // the stream the round robin looks at first

static inline bool op_ready(const SimStream::Op &op) { return op.kind != SimStream::WAIT || op.event->reached >= op.id; }

static inline void op_run(SimStream *s) {
    SimStream::Op op = s->ops.front();
    s->ops.pop_front();
    if (op.kind == SimStream::RECORD) {
        if (op.id > op.event->reached) { op.event->reached = op.id; op.event->ms = now_ms(); }
    } else if (op.kind != SimStream::WAIT) {
        op.run();
    }
}

// runs one queued operation: the next stream in turn whose next operation may run, host functions
// only when nothing else can; false if nothing can run
static inline bool step(void) {
    const size_t n = streams.size();
    for (int host = 0; host < 2; host++) {
        for (size_t k = 0; k < n; k++) {
            SimStream *s = streams[(stream_turn + k) % n];
            if (s->ops.empty() || !op_ready(s->ops.front())) { continue; }
            if ((s->ops.front().kind == SimStream::HOST) != (host == 1)) { continue; }
            stream_turn = (stream_turn + k + 1) % n;
            op_run(s);
            return true;
        }
    }
    return false;
}

// runs queued work until done() holds; a state from which it cannot be reached stops the program
template <class Done>
static inline void run_until(Done done, const char *what) {
    while (!done()) {
        if (!step()) {
            error("deadlock: the host waits for %s, which no stream can reach (a wait for an event that is never "
                  "recorded after it, or a cycle of waits between streams)", what);
            fflush(NULL);
            exit(EXIT_FAILURE);
        }
    }
}

static inline bool all_idle(void) {
    for (SimStream *s : streams) {
        if (!s->ops.empty()) { return false; }
    }
    return true;
}

static inline void drain(void) { run_until(all_idle, "the whole device"); }

// queue fn on stream s, or with s == 0 run it now after everything queued (the legacy stream)
static inline void enqueue(SimStream *s, std::function<void()> fn, SimStream::Kind kind = SimStream::WORK) {
    if (s == NULL) {
        drain();
        fn();
        return;
    }
    s->ops.push_back({kind, std::move(fn), NULL, 0});
}

static inline void record(SimEvent *e, SimStream *s) {
    const uint64_t id = ++event_serial;
    e->recorded = id;
    if (s == NULL) {
        drain();
        e->reached = id;
        e->ms = now_ms();
        return;
    }
    s->ops.push_back({SimStream::RECORD, nullptr, e, id});
}

// s waits for e's last record issued so far (none: nothing to wait for, as on a GPU)
static inline void wait_event(SimStream *s, SimEvent *e) {
    if (e->recorded == 0) { return; }
    if (s == NULL) {
        run_until([e]() { return e->reached >= e->recorded; }, "an event that stream 0 waits for");
        return;
    }
    s->ops.push_back({SimStream::WAIT, nullptr, e, e->recorded});
}

static inline void event_sync(SimEvent *e) {
    const uint64_t id = e->recorded;
    run_until([e, id]() { return e->reached >= id; }, "an event");
}

static inline void stream_sync(SimStream *s) {
    if (s == NULL) {
        drain();
        return;
    }
    run_until([s]() { return s->ops.empty(); }, "a stream's queued work");
}

}  // namespace sim

#endif  // SIM_STREAMS_H
