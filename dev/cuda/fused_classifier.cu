/*
 * Workbench: the fused softmax + cross-entropy + logit-gradient kernel and the loss sum
 * (llmc/cuda/fused_classifier.cuh), against a double-precision CPU softmax.
 *
 * Tolerances and why:
 *   losses (fp32): log-sum-exp over V terms with the hardware exp/log approximations (relative
 *       error ~2^-21 each) and fp32 sums: atol 2e-4 on losses of ~10, rtol 1e-5.
 *   dlogits (bf16): one rounding to bf16 (<= 2^-8 relative) of an fp32 value: rtol 1e-2, and
 *       atol 1e-6 * dloss for probabilities too small to matter.
 *   padded columns V..Vp-1: exactly 0 in every row.
 *   loss-only mode: logits unchanged (bitwise) and the same losses (bitwise) as the gradient mode.
 *   loss_sum_accumulate: fp32 sum of N losses: rtol 1e-5.
 * Rows checked: all in the small case; 64 sampled rows (with targets 0, V-1 and V-8 among them)
 * at GPT-2 size (B=8, T=1024, V=50257, Vp=50304). Determinism: a second run is bitwise identical.
 *
 *   ./fused_classifier
 */
#include "common.h"
#include "llmc/cuda/fused_classifier.cuh"

static void run_case(const char *name, int B, int T, int V, int Vp, int sampled, int timing) {
    const int N = B * T;
    const size_t total = (size_t)N * Vp;
    const float dloss = 1.0f / N;
    printf("case %s: B=%d T=%d V=%d Vp=%d, dloss=1/%d\n", name, B, T, V, Vp, N);
    float *logits = (float *)mallocCheck(total * sizeof(float));
    int *targets = (int *)mallocCheck(N * sizeof(int));
    {
        Rng r = {51};
        for (size_t i = 0; i < total; i++) {
            float x = rng_range(&r, -4.0f, 4.0f);
            if ((rng_next(&r) & 1023) == 0) { x += 6.0f; }  // a few confident tokens
            logits[i] = round_bf16(x);
        }
        for (int i = 0; i < N; i++) { targets[i] = rng_int(&r, V); }
        targets[0] = 0;
        targets[N - 1] = V - 1;  // the last real column, inside the chunk that straddles V
        if (N > 2) { targets[1] = V - 8 > 0 ? V - 8 : 0; }
        for (int i = 0; i < N; i += 5) { logits[(size_t)i * Vp + targets[i]] = round_bf16(8.0f); }  // some easy rows
    }
    floatX *d_logits = device_bf16_from(logits, total);
    int *d_targets = (int *)device_alloc(N * sizeof(int));
    cudaCheck(cudaMemcpy(d_targets, targets, N * sizeof(int), cudaMemcpyHostToDevice));
    float *d_losses = (float *)device_alloc(N * sizeof(float));

    // 1. loss only: the logits stay as they are
    fused_classifier(d_logits, d_losses, dloss, d_targets, B, T, V, Vp, 0, 0);
    float *losses_only = (float *)mallocCheck(N * sizeof(float));
    download_f32(losses_only, d_losses, N);
    uint16_t *bits = (uint16_t *)mallocCheck(total * sizeof(uint16_t)), *bits0 = (uint16_t *)mallocCheck(total * sizeof(uint16_t));
    for (size_t i = 0; i < total; i++) { bits0[i] = float_to_bf16(logits[i]); }
    cudaCheck(cudaMemcpy(bits, d_logits, total * sizeof(uint16_t), cudaMemcpyDeviceToHost));
    check_bitwise("loss-only mode leaves logits unchanged", bits, bits0, total * sizeof(uint16_t));

    // 2. losses and gradient
    fused_classifier(d_logits, d_losses, dloss, d_targets, B, T, V, Vp, 1, 0);
    float *losses = (float *)mallocCheck(N * sizeof(float));
    download_f32(losses, d_losses, N);
    check_bitwise("losses: loss-only mode == gradient mode", losses, losses_only, N * sizeof(float));
    cudaCheck(cudaMemcpy(bits, d_logits, total * sizeof(uint16_t), cudaMemcpyDeviceToHost));
    int padding_ok = 1;
    for (int r = 0; r < N && padding_ok; r++) {
        for (int c = V; c < Vp; c++) { if (bits[(size_t)r * Vp + c] != 0) { padding_ok = 0; break; } }
    }
    check_true("padded columns V..Vp-1 are 0 in every row", padding_ok, "");

    const int R = sampled < N ? sampled : N;
    int *rows = (int *)mallocCheck(R * sizeof(int));
    {
        Rng r = {52};
        for (int i = 0; i < R; i++) { rows[i] = R == N ? i : i == 0 ? 0 : i == 1 ? 1 : i == 2 ? N - 1 : rng_int(&r, N); }
    }
    float *gl = (float *)mallocCheck(R * sizeof(float)), *rl = (float *)mallocCheck(R * sizeof(float));
    float *gd = (float *)mallocCheck((size_t)R * V * sizeof(float)), *rd = (float *)mallocCheck((size_t)R * V * sizeof(float));
    for (int i = 0; i < R; i++) {
        const int r = rows[i];
        const float *x = logits + (size_t)r * Vp;
        double m = -INFINITY, s = 0.0;
        for (int c = 0; c < V; c++) { m = fmax(m, x[c]); }
        for (int c = 0; c < V; c++) { s += exp(x[c] - m); }
        gl[i] = losses[r];
        rl[i] = (float)(log(s) + m - x[targets[r]]);
        for (int c = 0; c < V; c++) {
            const double p = exp(x[c] - m) / s;
            rd[(size_t)i * V + c] = (float)((p - (c == targets[r] ? 1.0 : 0.0)) * dloss);
            gd[(size_t)i * V + c] = bf16_to_float(bits[(size_t)r * Vp + c]);
        }
    }
    check_close("losses (checked rows)", gl, rl, R, 2e-4, 1e-5);
    check_close("dlogits = (softmax - onehot) * dloss", gd, rd, (size_t)R * V, 1e-6 * dloss, 1e-2);

    // 3. determinism: the same logits again, the same bits
    {
        upload_bf16(d_logits, logits, total);
        fused_classifier(d_logits, d_losses, dloss, d_targets, B, T, V, Vp, 1, 0);
        uint16_t *again = (uint16_t *)mallocCheck(total * sizeof(uint16_t));
        cudaCheck(cudaMemcpy(again, d_logits, total * sizeof(uint16_t), cudaMemcpyDeviceToHost));
        check_bitwise("dlogits, second run", bits, again, total * sizeof(uint16_t));
        free(again);
        float *l2 = (float *)mallocCheck(N * sizeof(float));
        download_f32(l2, d_losses, N);
        check_bitwise("losses, second run", losses, l2, N * sizeof(float));
        free(l2);
    }

    // 4. the loss sum, accumulated onto a start value
    {
        float *d_acc = (float *)device_alloc(sizeof(float));
        const float start = 1.5f;
        cudaCheck(cudaMemcpy(d_acc, &start, sizeof(float), cudaMemcpyHostToDevice));
        loss_sum_accumulate(d_acc, d_losses, N, 1.0f / N, 0);
        float got;
        download_f32(&got, d_acc, 1);
        double sum = 0.0;
        for (int i = 0; i < N; i++) { sum += losses[i]; }
        float ref = (float)(start + sum / N);
        check_close("loss_sum_accumulate (acc += mean loss)", &got, &ref, 1, 0.0, 1e-5);
        cudaCheck(cudaFree(d_acc));
    }

    if (timing) {
        float ms = time_ms([&] { fused_classifier(d_logits, d_losses, dloss, d_targets, B, T, V, Vp, 0, 0); }, 20);
        report_bandwidth("fused_classifier, loss only", ms, (double)N * V * 2 + N * 8.0);
        // repeated in place: later runs read the previous gradient as logits, the same traffic
        ms = time_ms([&] { fused_classifier(d_logits, d_losses, dloss, d_targets, B, T, V, Vp, 1, 0); }, 20);
        report_bandwidth("fused_classifier, loss + dlogits (in place)", ms, (double)N * V * 2 + (double)N * Vp * 2 + N * 8.0);
    }

    cudaCheck(cudaFree(d_logits)); cudaCheck(cudaFree(d_targets)); cudaCheck(cudaFree(d_losses));
    free(logits); free(targets); free(losses_only); free(bits); free(bits0); free(losses); free(rows); free(gl); free(rl);
    free(gd); free(rd);
}

int main(void) {
    workbench_init("fused_classifier");
    run_case("small (all rows)", 2, 8, 100, 128, 1 << 30, 0);
    run_case("V not a multiple of 8 (V=61, Vp=64, all rows)", 3, 7, 61, 64, 1 << 30, 0);
    if (!WB_SIM) {
        run_case("GPT-2 124M", 8, 1024, 50257, 50304, 64, 1);
    } else {
        run_case("GPT-2 vocabulary, simulator size (all rows)", 1, 4, 50257, 50304, 1 << 30, 0);
    }
    return workbench_finish("fused_classifier");
}
