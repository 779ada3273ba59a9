/*
 * -lg N (llm.c's flag): every N steps, what the GPU of rank 0 is doing (llmc/device_readings.h: a
 * line after the step's, and the step's entries in metrics.jsonl and TensorBoard): SM clock
 * against its maximum, power against its limit, temperature against the slowdown threshold, the
 * driver's utilization figures, memory in use and why the clocks are held back, if they are. A
 * step time that drifts up with the power or temperature beside it is throttling, not the trainer.
 *
 * The figures come from NVML, the NVIDIA driver's management library (libnvidia-ml.so.1, beside
 * every driver), opened at run time with dlopen: nothing to link, no header needed, and a machine
 * without it loses only this line (one warning, the run goes on). The few types and constants
 * used are NVML's documented ABI, declared here. The device is found by its PCI bus id, so that
 * CUDA_VISIBLE_DEVICES (which renumbers CUDA's devices, not NVML's) names the right one.
 */
#ifndef LLMC_CUDA_GPU_TELEMETRY_CUH
#define LLMC_CUDA_GPU_TELEMETRY_CUH

#include <dlfcn.h>
#include "cuda_common.cuh"
#include "../device_readings.h"

// NVML's ABI, as documented (nvml.h): the subset this file calls
typedef int nvml_ret;                        // nvmlReturn_t: 0 = NVML_SUCCESS
typedef struct nvml_device_st *nvml_device;  // nvmlDevice_t
typedef struct { unsigned int gpu, memory; } nvml_utilization;                  // nvmlUtilization_t, percent
typedef struct { unsigned long long total, free, used; } nvml_memory;           // nvmlMemory_t, bytes
#define NVML_SM_CLOCK 1                      // NVML_CLOCK_SM
#define NVML_GPU_SENSOR 0                    // NVML_TEMPERATURE_GPU
#define NVML_SLOWDOWN_THRESHOLD 1            // NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
// nvmlClocksThrottleReasons (clock event reasons) bits, with the word the line prints for each
static const struct { unsigned long long bit; const char *why; } nvml_throttle_reasons[] = {
    {0x4ULL, "power cap"},           {0x80ULL, "power brake"},         {0x20ULL, "thermal (software)"},
    {0x40ULL, "thermal (hardware)"}, {0x8ULL, "hardware slowdown"},    {0x10ULL, "sync boost"},
    {0x2ULL, "application clocks"},  {0x100ULL, "display clocks"},     {0x1ULL, "idle"},
};

typedef struct {
    int state;  // 0: not tried yet, 1: ready, -1: unavailable (warned once)
    void *lib;
    nvml_device dev;
    nvml_ret (*get_clock)(nvml_device, int, unsigned int *);
    nvml_ret (*get_max_clock)(nvml_device, int, unsigned int *);
    nvml_ret (*get_power)(nvml_device, unsigned int *);        // milliwatts
    nvml_ret (*get_power_limit)(nvml_device, unsigned int *);  // milliwatts (the enforced limit)
    nvml_ret (*get_temperature)(nvml_device, int, unsigned int *);
    nvml_ret (*get_temperature_threshold)(nvml_device, int, unsigned int *);
    nvml_ret (*get_throttle)(nvml_device, unsigned long long *);
    nvml_ret (*get_utilization)(nvml_device, nvml_utilization *);
    nvml_ret (*get_memory)(nvml_device, nvml_memory *);
} GpuTelemetry;

static GpuTelemetry gpu_telemetry;

// loads NVML and finds CUDA device `device` in it; 0, or -1 with the reason in why
static int gpu_telemetry_open(GpuTelemetry *t, int device, char *why, size_t n) {
    t->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (t->lib == NULL) {
        snprintf(why, n, "cannot load libnvidia-ml.so.1, the NVIDIA driver's NVML (%s)", dlerror());
        return -1;
    }
    typedef nvml_ret (*init_fn)(void);
    typedef nvml_ret (*by_bus_fn)(const char *, nvml_device *);
    init_fn init = (init_fn)dlsym(t->lib, "nvmlInit_v2");
    by_bus_fn by_bus = (by_bus_fn)dlsym(t->lib, "nvmlDeviceGetHandleByPciBusId_v2");
#define GT_SYM(field, name) (t->field = (decltype(t->field))dlsym(t->lib, name))
    GT_SYM(get_clock, "nvmlDeviceGetClockInfo");
    GT_SYM(get_max_clock, "nvmlDeviceGetMaxClockInfo");
    GT_SYM(get_power, "nvmlDeviceGetPowerUsage");
    GT_SYM(get_power_limit, "nvmlDeviceGetEnforcedPowerLimit");
    GT_SYM(get_temperature, "nvmlDeviceGetTemperature");
    GT_SYM(get_temperature_threshold, "nvmlDeviceGetTemperatureThreshold");
    GT_SYM(get_throttle, "nvmlDeviceGetCurrentClocksEventReasons");  // the newer drivers' name,
    if (t->get_throttle == NULL) { GT_SYM(get_throttle, "nvmlDeviceGetCurrentClocksThrottleReasons"); }  // the older
    GT_SYM(get_utilization, "nvmlDeviceGetUtilizationRates");
    GT_SYM(get_memory, "nvmlDeviceGetMemoryInfo");
#undef GT_SYM
    if (init == NULL || by_bus == NULL) {
        snprintf(why, n, "libnvidia-ml.so.1 lacks nvmlInit_v2 or nvmlDeviceGetHandleByPciBusId_v2 (a driver too old)");
        return -1;
    }
    nvml_ret rc = init();
    if (rc != 0) {
        snprintf(why, n, "nvmlInit_v2 failed (NVML error %d)", rc);
        return -1;
    }
    char bus[32] = "";
    cudaCheck(cudaDeviceGetPCIBusId(bus, (int)sizeof(bus) - 1, device));
    rc = by_bus(bus, &t->dev);
    if (rc != 0) {
        snprintf(why, n, "NVML does not know the GPU at PCI bus id %s (NVML error %d)", bus, rc);
        return -1;
    }
    return 0;
}

// f(dev, ...) into *out where the driver has f and it succeeds; 1 if it did
#define GPU_TELEMETRY_GET(t, f, ...) ((t)->f != NULL && (t)->f((t)->dev, __VA_ARGS__) == 0)

// this process's GPU's readings into d; 1 if there are any. On the first call NVML is opened, and
// where it cannot be, one warning says why and every later call returns 0 (no line)
static int gpu_telemetry_read(DeviceReadings *d) {
    GpuTelemetry *t = &gpu_telemetry;
    device_readings_clear(d);
    if (t->state == 0) {
        int device = 0;
        char why[512];
        cudaCheck(cudaGetDevice(&device));
        t->state = gpu_telemetry_open(t, device, why, sizeof(why)) == 0 ? 1 : -1;
        if (t->state < 0) { llmc_warn("-lg: no GPU line: %s; the run goes on without it", why); }
    }
    if (t->state < 0) { return 0; }
    unsigned int v;
    if (GPU_TELEMETRY_GET(t, get_clock, NVML_SM_CLOCK, &v)) { d->sm_mhz = v; }
    if (GPU_TELEMETRY_GET(t, get_max_clock, NVML_SM_CLOCK, &v)) { d->sm_max_mhz = v; }
    if (GPU_TELEMETRY_GET(t, get_power, &v)) { d->power_w = v / 1000.0; }
    if (GPU_TELEMETRY_GET(t, get_power_limit, &v)) { d->power_limit_w = v / 1000.0; }
    if (GPU_TELEMETRY_GET(t, get_temperature, NVML_GPU_SENSOR, &v)) { d->temp_c = v; }
    if (GPU_TELEMETRY_GET(t, get_temperature_threshold, NVML_SLOWDOWN_THRESHOLD, &v)) { d->temp_slowdown_c = v; }
    nvml_utilization u;
    if (GPU_TELEMETRY_GET(t, get_utilization, &u)) { d->busy_pct = u.gpu; d->mem_busy_pct = u.memory; }
    nvml_memory m;
    if (GPU_TELEMETRY_GET(t, get_memory, &m)) { d->mem_used_gib = m.used / 1073741824.0; d->mem_total_gib = m.total / 1073741824.0; }
    unsigned long long reasons = 0;
    if (GPU_TELEMETRY_GET(t, get_throttle, &reasons)) {
        size_t len = 0;
        for (size_t i = 0; i < sizeof(nvml_throttle_reasons) / sizeof(nvml_throttle_reasons[0]); i++) {
            if (reasons & nvml_throttle_reasons[i].bit) {
                len += (size_t)snprintf(d->held_back + len, len < sizeof(d->held_back) ? sizeof(d->held_back) - len : 0,
                                        "%s%s", len ? ", " : "", nvml_throttle_reasons[i].why);
            }
        }
        if (len == 0) { snprintf(d->held_back, sizeof(d->held_back), "no"); }
    }
    return 1;
}

#endif  // LLMC_CUDA_GPU_TELEMETRY_CUH
