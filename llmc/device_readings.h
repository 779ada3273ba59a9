/*
 * -lg N: what a device reports about itself every N steps (the CUDA trainer: rank 0's GPU through
 * NVML, llmc/cuda/gpu_telemetry.cuh), in one form for the step's extra line, metrics.jsonl and
 * TensorBoard (llmc/logger.h). A reading the device does not give is NAN (null in JSON, left out
 * of the line and of TensorBoard).
 */
#ifndef LLMC_DEVICE_READINGS_H
#define LLMC_DEVICE_READINGS_H

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    double sm_mhz, sm_max_mhz;         // SM clock, and its maximum
    double power_w, power_limit_w;     // board power, and the enforced limit
    double temp_c, temp_slowdown_c;    // temperature, and where the GPU starts slowing down
    double busy_pct, mem_busy_pct;     // the driver's utilization figures (share of time busy)
    double mem_used_gib, mem_total_gib;
    char held_back[128];               // what holds the clocks back ("power cap, thermal (software)"),
                                       // "no", or "" where the device does not say
} DeviceReadings;

static inline void device_readings_clear(DeviceReadings *d) {
    d->sm_mhz = d->sm_max_mhz = d->power_w = d->power_limit_w = d->temp_c = d->temp_slowdown_c = NAN;
    d->busy_pct = d->mem_busy_pct = d->mem_used_gib = d->mem_total_gib = NAN;
    d->held_back[0] = '\0';
}

// the step's extra line, e.g. "gpu: SM 1410/1980 MHz | 650/700 W | 62 C (slows at 87) | busy 97%,
// memory busy 41% | memory 24.0/140.0 GiB | clocks held back: power cap" (fields the device did not
// give are left out)
static inline void device_readings_line(const DeviceReadings *d, char *out, size_t n) {
    size_t len = 0;
#define DR_PRINTF(...) (len += (size_t)snprintf(out + len, len < n ? n - len : 0, __VA_ARGS__))
    DR_PRINTF("gpu:");
    if (isfinite(d->sm_mhz)) {
        DR_PRINTF(" SM %.0f", d->sm_mhz);
        if (isfinite(d->sm_max_mhz)) { DR_PRINTF("/%.0f", d->sm_max_mhz); }
        DR_PRINTF(" MHz |");
    }
    if (isfinite(d->power_w)) {
        DR_PRINTF(" %.0f", floor(d->power_w));
        if (isfinite(d->power_limit_w)) { DR_PRINTF("/%.0f", floor(d->power_limit_w)); }
        DR_PRINTF(" W |");
    }
    if (isfinite(d->temp_c)) {
        DR_PRINTF(" %.0f C", d->temp_c);
        if (isfinite(d->temp_slowdown_c)) { DR_PRINTF(" (slows at %.0f)", d->temp_slowdown_c); }
        DR_PRINTF(" |");
    }
    if (isfinite(d->busy_pct)) { DR_PRINTF(" busy %.0f%%, memory busy %.0f%% |", d->busy_pct, d->mem_busy_pct); }
    if (isfinite(d->mem_used_gib)) { DR_PRINTF(" memory %.1f/%.1f GiB |", d->mem_used_gib, d->mem_total_gib); }
    if (d->held_back[0]) { DR_PRINTF(" clocks held back: %s", d->held_back); }
#undef DR_PRINTF
    if (len >= 2 && len < n && out[len - 1] == '|') { out[len - 2] = '\0'; }  // a trailing " |"
}

#endif  // LLMC_DEVICE_READINGS_H
