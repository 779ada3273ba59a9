/*
 * The peak dense bf16 tensor-core throughput of a GPU, the denominator of MFU (model FLOP
 * utilization), from its name, SM count and maximum clock. Host-only, plain C: the CUDA trainer
 * passes what cudaGetDeviceProperties and cudaDeviceGetAttribute(cudaDevAttrClockRate) report
 * (CUDA 13 removed cudaDeviceProp::clockRate), and dev/cuda/host_logic_test checks the lookup.
 *
 * Peaks are the spec sheets' dense (not 2:4 sparse) bf16 figures of the product the name names,
 * scaled down where this device has fewer SMs (a MIG slice) or a lower maximum clock (a capped
 * card) than that product: a figure MFU can be trusted against. The products differ a lot under
 * one compute capability (sm_90: H100 SXM 989, H100 NVL 835, H100 PCIe 756 TFLOP/s), so the name
 * decides; a device not in the table has no peak, and MFU is printed as n/a rather than wrong.
 */
#ifndef LLMC_GPU_PEAK_H
#define LLMC_GPU_PEAK_H

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *match;   // a substring of the device name; the first matching row wins
    const char *label;   // the product, for the banner
    double tflops;       // dense bf16 tensor TFLOP/s on the spec sheet
    int sms;             // SMs of that product
    int max_mhz;         // its maximum (boost) clock, as cudaDevAttrClockRate reports it
} GpuPeakRow;

// more specific names first: "H100 NVL" and "H100 PCIe" before "H100" (SXM5: "H100 80GB HBM3")
static const GpuPeakRow gpu_peak_table[] = {
    {"H100 NVL", "H100 NVL", 835.0, 132, 1785},
    {"H100 PCIe", "H100 PCIe", 756.0, 114, 1755},
    {"H100", "H100 SXM", 989.0, 132, 1980},
    {"H200 NVL", "H200 NVL", 835.0, 132, 1785},
    {"GH200", "GH200", 989.0, 132, 1980},
    {"H200", "H200 SXM", 989.0, 132, 1980},
    {"A100", "A100 (SXM4 and PCIe)", 312.0, 108, 1410},
};

/*
 * Peak FLOP/s of a device named `name` with `sms` SMs and a maximum clock of `clock_khz`; 0 when
 * the table does not know it. `why` (may be NULL) receives the banner's explanation.
 */
static inline double gpu_peak_lookup(const char *name, int sms, int clock_khz, char *why, size_t why_size) {
    const int n = (int)(sizeof(gpu_peak_table) / sizeof(gpu_peak_table[0]));
    for (int i = 0; i < n; i++) {
        const GpuPeakRow *r = &gpu_peak_table[i];
        if (strstr(name, r->match) == NULL) { continue; }
        const double sm_scale = sms > 0 && sms < r->sms ? (double)sms / r->sms : 1.0;
        const double mhz = clock_khz / 1000.0;
        const double clock_scale = mhz > 0 && mhz < r->max_mhz ? mhz / r->max_mhz : 1.0;
        const double peak = r->tflops * 1e12 * sm_scale * clock_scale;
        if (why) {
            snprintf(why, why_size, "%.0f TFLOP/s dense bf16 (%s: %.0f on the spec sheet at %d SMs, %d MHz; this GPU %d "
                     "SMs, %.0f MHz)", peak / 1e12, r->label, r->tflops, r->sms, r->max_mhz, sms, mhz);
        }
        return peak;
    }
    if (why) { snprintf(why, why_size, "n/a (no peak known for '%s': add it to llmc/gpu_peak.h)", name); }
    return 0.0;
}

#endif  // LLMC_GPU_PEAK_H
