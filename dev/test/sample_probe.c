/*
 * llmc/generate.h's sample_token for dev/test/test_torch_ddp.sh to compare with train_gpt2.py's
 * twin: one case per line of stdin, "<temperature> <top_k> <coin> <p_0> ... <p_n-1>" (floats in
 * any strtof form, hex included, so that the two sides read the same bits), one token id per line
 * of stdout.
 *
 *   ./sample_probe < cases.txt
 */
#include "../../llmc/generate.h"

int main(void) {
    enum { MAX_N = 4096 };
    static float probs[MAX_N], scratch[2 * MAX_N];
    static char line[MAX_N * 40];
    while (fgets(line, sizeof(line), stdin)) {
        char *p = line, *end;
        float temperature = strtof(p, &end);
        p = end;
        int top_k = (int)strtol(p, &end, 10);
        p = end;
        float coin = strtof(p, &end);
        p = end;
        int n = 0;
        for (float v = strtof(p, &end); end != p && n < MAX_N; v = strtof(p, &end)) {
            probs[n++] = v;
            p = end;
        }
        if (n == 0) { fprintf(stderr, "sample_probe: a line without probabilities\n"); return 1; }
        printf("%d\n", sample_token(probs, n, temperature, top_k, coin, scratch));
    }
    return 0;
}
