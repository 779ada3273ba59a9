// libFuzzer harness: the HellaSwag eval file (llmc/hellaswag.h). The input is an eval file; an
// accepted one is scored with a stand-in model that checks what the evaluator hands it: every
// input and target id below the vocabulary, rows no longer than T.
#include "fuzz.h"
#include "../../llmc/hellaswag.h"

typedef struct {
    const char *path;
    int vocab, B, T;
    int share;  // the examples of one rank's share, at most (set per file)
} EvalCase;

static int stand_in_forward(void *ctx, int examples_done, const int *inputs, const int *targets, int B, int T,
                            float *losses) {
    const EvalCase *c = (const EvalCase *)ctx;
    if (examples_done < 0 || examples_done >= c->share) { fuzz_fail("a batch after %d of %d examples", examples_done, c->share); }
    if (B < 1 || B > c->B || T < 1 || T > c->T) { fuzz_fail("forward called with B=%d T=%d (limits %d, %d)", B, T, c->B, c->T); }
    for (int i = 0; i < B * T; i++) {
        if (inputs[i] < 0 || inputs[i] >= c->vocab || targets[i] < 0 || targets[i] >= c->vocab) {
            fuzz_fail("position %d: input %d, target %d outside the vocabulary %d", i, inputs[i], targets[i], c->vocab);
        }
        losses[i] = (float)((inputs[i] * 31 + targets[i]) % 97);  // any deterministic score
    }
    return 0;
}

static void run_eval(void *arg) {
    EvalCase *c = (EvalCase *)arg;
    EvalSet es;
    evalset_load(&es, c->path, c->vocab);
    c->share = (es.num_examples + 1) / 2;
    int evaluated = 0, total = 0;
    for (int rank = 0; rank < 2; rank++) {
        int correct = evalset_run(&es, -1, rank, 2, c->B, c->T, stand_in_forward, c, &evaluated);
        if (correct < 0 || correct > evaluated) { fuzz_fail("%d of %d correct", correct, evaluated); }
        total += evaluated;
    }
    if (total != es.num_examples) { fuzz_fail("2 ranks evaluated %d of %d examples", total, es.num_examples); }
    evalset_free(&es);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    EvalCase c;
    c.path = fuzz_write("hellaswag.bin", data, size);
    c.vocab = size % 2 ? 50257 : 1024;
    c.B = 1 + (int)(size % 5);
    c.T = 4 + (int)(size % 61);
    if (fuzz_call(run_eval, &c)) { fuzz_end(); }
    return 0;
}
