/*
 * The simulator's AddressSanitizer build sees a kernel's bad accesses after its threads switched.
 * Every __syncthreads and warp collective is a jump between fiber stacks, announced to
 * AddressSanitizer, and a thread of the second block continues the parked fiber of the first
 * (sim/engine.h); a switch done wrong shows as a report on a good kernel, or as none on a bad one.
 *   sim_asan_check ok      a kernel with a local array and a heap buffer used across barriers and
 *                          a shuffle: exits 0 with the right results, no report
 *   sim_asan_check heap    the same, thread 127 (block 1) writes one float past the buffer
 *   sim_asan_check stack   the same, thread 69 (block 1) reads one float past its local array
 * make run-sim runs the three and expects a clean run, a heap-buffer-overflow and a
 * stack-buffer-overflow report.
 */
#include <cuda_runtime.h>

enum Mode { OK, HEAP, STACK };
static const int BLOCKS = 2, THREADS = 64, N = BLOCKS * THREADS;

// UBSan off here: it would see the bad accesses first (an array's bounds, an object's size)
__global__ __attribute__((no_sanitize_undefined)) void switching_kernel(float *out, int n, int mode) {
    float local[8];
    for (int i = 0; i < 8; i++) { local[i] = (float)(threadIdx.x + i); }
    __syncthreads();
    float v = __shfl_xor_sync(0xffffffffu, local[threadIdx.x % 8], 1);
    __syncthreads();
    volatile int past = 8;  // not known to the compiler: the access is made, and checked
    const float *p = local;
    if (mode == STACK && blockIdx.x == 1 && threadIdx.x == 5) { v += p[past]; }
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (mode == HEAP && i == n - 1) { i = n; }
    out[i] = v;
}

int main(int argc, char **argv) {
    const char *m = argc == 2 ? argv[1] : "";
    const int mode = !strcmp(m, "ok") ? OK : !strcmp(m, "heap") ? HEAP : !strcmp(m, "stack") ? STACK : -1;
    if (mode < 0) {
        fprintf(stderr, "usage: sim_asan_check ok|heap|stack\n");
        return 2;
    }
    float *d_out;
    cudaMalloc((void **)&d_out, N * sizeof(float));
    sim_launch<switching_kernel>(dim3(BLOCKS), dim3(THREADS), 0, 0, d_out, N, mode);
    float out[N];
    cudaMemcpy(out, d_out, sizeof(out), cudaMemcpyDeviceToHost);
    int wrong = 0;
    for (int i = 0; i < N; i++) {
        const int lane = (i % THREADS) ^ 1;  // the shuffle's partner, which sent its local[lane % 8]
        wrong += out[i] != (float)(lane + lane % 8);
    }
    cudaFree(d_out);
    printf("sim_asan_check %s: %d of %d results wrong, %ld simulator errors\n", m, wrong, N, sim::errors);
    return wrong > 0 || sim::errors > 0;
}
