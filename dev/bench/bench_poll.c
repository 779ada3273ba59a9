/*
 * What the watchdog's polling (llmc_poll_pause in llmc/utils.h, the loop of gpu_wait_event in
 * llmc/cuda/processes.cuh) adds to the latency of a host wait, on the CPU: a second thread plays the
 * GPU and "completes" an event after a given time; the waiter polls a flag as gpu_wait_event
 * polls cudaEventQuery, and each wait's latency is the time from the completion to the moment the
 * waiter sees it.
 *
 *   bench_poll <mode> <waits> <microseconds per wait>
 *   mode: poll (llmc_poll_pause, the watchdog), spin (a busy loop: the lowest latency there is,
 *         what cudaEventSynchronize's default spin does on an idle core)
 * Prints the median, 90th percentile and maximum latency. dev/bench/RESULTS.md ("Watchdog
 * polling") has the figures and the paired-run comparison of the two modes' whole runs.
 */
#include <pthread.h>
#include <stdatomic.h>
#include "../../llmc/utils.h"

static atomic_int done;           // the event: 1 once "the GPU" completed it
static double done_at;            // when it completed (llmc_wall_seconds)
static long wait_us;

static void *gpu(void *arg) {
    long n = *(long *)arg;
    for (long i = 0; i < n; i++) {
        while (atomic_load(&done)) { sched_yield(); }  // the waiter has not consumed the last one yet
        const double until = llmc_wall_seconds() + wait_us * 1e-6;
        while (llmc_wall_seconds() < until) { if (wait_us > 200) { usleep(50); } }
        done_at = llmc_wall_seconds();
        atomic_store(&done, 1);
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc != 4 || (strcmp(argv[1], "poll") && strcmp(argv[1], "spin"))) {
        llmc_die("usage: bench_poll poll|spin <waits> <microseconds per wait>");
    }
    const int poll = !strcmp(argv[1], "poll");
    long n = atol(argv[2]);
    wait_us = atol(argv[3]);
    if (n < 1 || wait_us < 0) { llmc_die("bench_poll: waits must be at least 1 and microseconds not negative"); }
    double *lat = (double *)mallocCheck((size_t)n * sizeof(double));
    pthread_t t;
    pthread_create(&t, NULL, gpu, &n);
    for (long i = 0; i < n; i++) {
        long polls = 0;
        while (!atomic_load(&done)) {
            if (poll) { llmc_poll_pause(&polls); }
        }
        lat[i] = (llmc_wall_seconds() - done_at) * 1e6;
        atomic_store(&done, 0);
    }
    pthread_join(t, NULL);
    qsort(lat, (size_t)n, sizeof(double), cmp_double);
    printf("%s: %ld waits of %ld us: latency median %.1f us, 90%% %.1f us, max %.1f us\n", argv[1], n, wait_us,
           lat[n / 2], lat[n * 9 / 10], lat[n - 1]);
    free(lat);
    return 0;
}
