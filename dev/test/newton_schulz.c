/*
 * The CPU trainer's Muon step (train_gpt2.c's muon_update) on matrices read from a file, for
 * dev/test/test_newton_schulz.py, which holds the result against numpy's SVD.
 *
 *   ./dev/test/newton_schulz in.bin out.bin
 * in.bin: int32 count, then per matrix int32 rows, int32 cols and rows*cols float32 (row-major).
 * out.bin: the orthogonalized update O of each matrix in the same layout. With momentum 0 (U = G),
 * learning rate 1, no weight decay and parameters 0, muon_update leaves p = -scale * O.
 */
#define TESTING
#include "../../train_gpt2.c"

static void read_exact(void *dst, size_t size, size_t n, FILE *f, const char *path) {
    if (fread(dst, size, n, f) != n) { llmc_die("%s: truncated (count, then rows, cols and the floats of each matrix)", path); }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s in.bin out.bin (see the top of dev/test/newton_schulz.c)\n", argv[0]);
        return 1;
    }
    FILE *in = fopenCheck(argv[1], "rb"), *out = fopenCheck(argv[2], "wb");
    int count;
    read_exact(&count, sizeof(int), 1, in, argv[1]);
    if (count < 1 || count > 1000) { llmc_die("%s: %d matrices; expected 1..1000", argv[1], count); }
    fwriteCheck(&count, sizeof(int), 1, out);
    OptSettings o;
    memset(&o, 0, sizeof(o));
    o.muon = 1; o.muon_lr = 1.0f; o.muon_momentum = 0.0f; o.muon_ns_steps = 5; o.grad_scale = 1.0f;
    for (int k = 0; k < count; k++) {
        int dims[2];
        read_exact(dims, sizeof(int), 2, in, argv[1]);
        if (dims[0] < 1 || dims[1] < 1 || dims[0] > 4096 || dims[1] > 4096) {
            llmc_die("%s: matrix %d is %d x %d; expected sides of 1..4096", argv[1], k, dims[0], dims[1]);
        }
        const size_t n = (size_t)dims[0] * dims[1];
        float *g = (float *)mallocCheck(n * sizeof(float)), *p = (float *)callocCheck(n, sizeof(float));
        float *buf = (float *)callocCheck(n, sizeof(float));
        float *scratch = (float *)mallocCheck(muon_scratch_floats(dims[0], dims[1]) * sizeof(float));
        read_exact(g, sizeof(float), n, in, argv[1]);
        muon_update(p, g, buf, dims[0], dims[1], &o, scratch);
        const float scale = muon_scale(dims[0], dims[1]);
        for (size_t i = 0; i < n; i++) { p[i] = -p[i] / scale; }
        fwriteCheck(dims, sizeof(int), 2, out);
        fwriteCheck(p, sizeof(float), n, out);
        free(g); free(p); free(buf); free(scratch);
    }
    fcloseCheck(in);
    fcloseCheck(out);
    return 0;
}
