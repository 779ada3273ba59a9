/*
 * A stand-in for the NVIDIA driver's libnvidia-ml.so.1 (NVML) with fixed readings, for the test of
 * -lg on the CUDA simulator (dev/test/test_cuda_sim.sh): built as libnvidia-ml.so.1 into a folder
 * put first on LD_LIBRARY_PATH. It knows one GPU, at the PCI bus id the simulator gives device 0;
 * asked for another, it says "not found" (NVML's 6), as the real one would. Readings: SM clock
 * 1410 of 1980 MHz, 650.5 of 700 W, 62 C (slowdown at 87), 97% busy and 41% memory busy, 24 of 140
 * GiB in use, clocks held back by the power cap (0x4, through the newer drivers' name of the call).
 */
#include <string.h>

typedef struct { unsigned int gpu, memory; } Utilization;
typedef struct { unsigned long long total, free, used; } Memory;
static int device_token;  // the one device's handle points here

int nvmlInit_v2(void) { return 0; }
int nvmlDeviceGetHandleByPciBusId_v2(const char *bus, void **device) {
    if (strcmp(bus, "0000:00:00.0") != 0) { return 6; }
    *device = &device_token;
    return 0;
}
int nvmlDeviceGetClockInfo(void *d, int type, unsigned int *mhz) { *mhz = type == 1 ? 1410 : 0; return d == &device_token ? 0 : 2; }
int nvmlDeviceGetMaxClockInfo(void *d, int type, unsigned int *mhz) { *mhz = type == 1 ? 1980 : 0; return d == &device_token ? 0 : 2; }
int nvmlDeviceGetPowerUsage(void *d, unsigned int *mw) { *mw = 650500; return d == &device_token ? 0 : 2; }
int nvmlDeviceGetEnforcedPowerLimit(void *d, unsigned int *mw) { *mw = 700000; return d == &device_token ? 0 : 2; }
int nvmlDeviceGetTemperature(void *d, int sensor, unsigned int *c) { *c = sensor == 0 ? 62 : 0; return d == &device_token ? 0 : 2; }
int nvmlDeviceGetTemperatureThreshold(void *d, int which, unsigned int *c) { *c = which == 1 ? 87 : 95; return d == &device_token ? 0 : 2; }
// the newer drivers export both names; the trainer must take the newer (the older would say thermal)
int nvmlDeviceGetCurrentClocksEventReasons(void *d, unsigned long long *r) { *r = 0x4; return d == &device_token ? 0 : 2; }
int nvmlDeviceGetCurrentClocksThrottleReasons(void *d, unsigned long long *r) { *r = 0x40; return d == &device_token ? 0 : 2; }
int nvmlDeviceGetUtilizationRates(void *d, Utilization *u) { u->gpu = 97; u->memory = 41; return d == &device_token ? 0 : 2; }
int nvmlDeviceGetMemoryInfo(void *d, Memory *m) {
    m->total = 140ULL << 30;
    m->used = 24ULL << 30;
    m->free = m->total - m->used;
    return d == &device_token ? 0 : 2;
}
