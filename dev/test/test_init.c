/*
 * The random init of both trainers (llmc/model_io.h gpt2_init_params), which runs on every OpenMP
 * thread: its values must not depend on the thread count.
 *
 *   ./test_init <out prefix>   for two models: the init on 1 thread and on 2 threads, bitwise
 *                              compared; the values are written to <out prefix>_<i>.f32 (raw fp32)
 *                              for dev/test/test_init.sh to compare with train_gpt2.py's twin
 *   ./test_init -e <model>     one init of <model> on all threads, nothing else: what
 *                              dev/bench/RESULTS.md times ("Random init")
 */
#include <omp.h>
#include "../../llmc/model_io.h"

static const char *const models[] = {"L2:C64:H4:T32:V130", "L3:C128:H2:T64:V1000"};

static float *init_on(const GPT2Config *c, uint64_t seed, int threads) {
    float *p = (float *)mallocCheck(gpt2_num_params(c) * sizeof(float));
    omp_set_num_threads(threads);
    gpt2_init_params(p, c, seed);
    return p;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "-e")) {
        GPT2Config c;
        if (!gpt2_parse_descriptor(argv[2], &c)) { llmc_die("-e %s: expected a descriptor (d48, L2:C64:H4, ...)", argv[2]); }
        float *p = init_on(&c, 1337, omp_get_num_procs());
        printf("%s: %zu parameters initialized on %d threads (first %.6f)\n", argv[2], gpt2_num_params(&c),
               omp_get_num_procs(), p[0]);
        free(p);
        return 0;
    }
    if (argc != 2) { llmc_die("usage: test_init <out prefix> | test_init -e <model>"); }
    int failed = 0;
    for (int m = 0; m < 2; m++) {
        GPT2Config c;
        gpt2_parse_descriptor(models[m], &c);
        const size_t P = gpt2_num_params(&c);
        float *one = init_on(&c, 7, 1), *two = init_on(&c, 7, 2);
        size_t diff = 0;
        for (size_t i = 0; i < P; i++) { diff += memcmp(&one[i], &two[i], sizeof(float)) != 0; }
        printf("%-4s %s: %zu parameters, %zu differ between 1 and 2 threads\n", diff ? "FAIL" : "ok", models[m], P, diff);
        failed |= diff != 0;
        char path[4096];
        snprintf(path, sizeof(path), "%s_%d.f32", argv[1], m);
        FILE *f = fopenCheck(path, "wb");
        fwriteCheck(one, sizeof(float), P, f);
        fcloseCheck(f);
        free(one);
        free(two);
    }
    return failed;
}
