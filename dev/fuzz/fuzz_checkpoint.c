// libFuzzer harness: checkpoint state files and DONE markers (llmc/checkpoint.h), read by -y 1.
// A checkpoint dir holds a complete, valid checkpoint 1 and checkpoint 2, whose state file (or,
// for an input that starts with "step", whose DONE marker) is the input. checkpoint_resume must
// load checkpoint 2 or fall back to 1 (or reject a command-line mismatch with llmc_die), hand the
// model only ranges it holds, and leave a train state in range: the guard and the data position
// are used right away by the training loop, as here. checkpoint_plan_resume, which reads the same
// files before the memory plan, must find checkpoint 2 or 1 and give fields in range.
#include "fuzz.h"
#include "../../llmc/checkpoint.h"
#include "../../llmc/dataloader.h"

#define DESC "L1:C8:H2:T16:V64"  // the model of the seeds (dev/fuzz/make_seeds.sh); settings below too

typedef struct {
    float *params, *m, *v;
} FakeModel;

static FakeModel fm;
static Backend bk;
static char *valid_state2, *valid_done2;  // bytes of checkpoint 2's valid files
static size_t valid_state2_len, valid_done2_len;

static void fake_get_opt(Backend *b, size_t off, size_t n, float *m, float *v, float *master) {
    (void)b; (void)master;
    memcpy(m, fm.m + off, n * sizeof(float));
    memcpy(v, fm.v + off, n * sizeof(float));
}
static void fake_set_opt(Backend *b, size_t off, size_t n, const float *m, const float *v, const float *master) {
    (void)master;
    if (off < b->opt_offset || off + n > b->opt_offset + b->opt_count) {
        fuzz_fail("set_opt_state [%zu, %zu) outside the held range [%zu, %zu)", off, off + n, b->opt_offset,
                  b->opt_offset + b->opt_count);
    }
    memcpy(fm.m + off, m, n * sizeof(float));
    memcpy(fm.v + off, v, n * sizeof(float));
}
static void fake_copy_params(Backend *b, size_t off, size_t n, void *dst) {
    if (off + n > b->num_params) { fuzz_fail("copy_params [%zu, %zu) past %zu parameters", off, off + n, b->num_params); }
    memcpy(dst, fm.params + off, n * sizeof(float));
}
static void fake_load(Backend *b, const char *path) {
    ModelFileInfo info;
    model_file_info(path, &info);
    if (!gpt2_config_equal(&info.config, &b->config)) { fuzz_fail("a verified checkpoint holds another model"); }
    model_file_load(path, &info, fm.params, NULL);
}

static void train_state_defaults(TrainState *st) {
    memset(st, 0, sizeof(*st));
    st->B = 2; st->T = 8; st->total_batch = 16; st->shuffle = 1; st->seed = 1337;
    guard_init(&st->guard, 3.0f, 3.0f, 10);
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) { fuzz_fail("cannot read %s", path); }
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = (char *)malloc(*len + 1);
    if (fread(buf, 1, *len, f) != *len) { fuzz_fail("cannot read %s", path); }
    fclose(f);
    return buf;
}

// checkpoints 1 and 2 of the fake model, written by the code under test
static void setup(void) {
    memset(&bk, 0, sizeof(bk));
    if (!gpt2_parse_descriptor(DESC, &bk.config)) { fuzz_fail("bad descriptor"); }
    bk.num_params = gpt2_num_params(&bk.config);
    bk.opt_count = bk.num_params;
    bk.get_opt_state = fake_get_opt;
    bk.set_opt_state = fake_set_opt;
    bk.model_version = MODEL_VERSION_FP32;
    bk.copy_params = fake_copy_params;
    bk.load_model = fake_load;
    fm.params = (float *)calloc(bk.num_params, sizeof(float));
    fm.m = (float *)calloc(bk.num_params, sizeof(float));
    fm.v = (float *)calloc(bk.num_params, sizeof(float));
    gpt2_init_params(fm.params, &bk.config, 1);
    Comm c = {0};
    c.world_size = 1;
    c.barrier = comm_single_barrier;
    c.allreduce_max_i32 = comm_single_allreduce_i32;
    make_dirs(fuzz_path("ckpt"));
    TrainState st;
    train_state_defaults(&st);
    for (int step = 1; step <= 2; step++) {
        st.step = st.opt_steps = step;
        checkpoint_save(fuzz_path("ckpt"), &bk, &c, &st);
    }
    valid_state2 = slurp(fuzz_path("ckpt/state_00000002_00000.bin"), &valid_state2_len);
    valid_done2 = slurp(fuzz_path("ckpt/DONE_00000002"), &valid_done2_len);
}

static void resume(void *arg) {
    (void)arg;
    Comm c = {0};
    c.world_size = 1;
    c.allreduce_max_i32 = comm_single_allreduce_i32;
    c.bcast = comm_single_bcast;
    // what -b auto and -r auto read of the same files first (checkpoint_plan_resume): in range
    TrainArgs a;
    memset(&a, 0, sizeof(a));
    a.resume = 1;
    a.output_dir = fuzz_path("ckpt");
    PlanResume pr;
    checkpoint_plan_resume(&pr, &a, 0);
    if (!pr.found || (pr.step != 1 && pr.step != 2) || pr.B < 1 || pr.world_size < 1 || pr.recompute < -1 ||
        pr.recompute > 2 || pr.total_batch < 1) {
        fuzz_fail("plan resume: found %d step %d B %d world %d -r %d d %lld", pr.found, pr.step, pr.B, pr.world_size,
                  pr.recompute, pr.total_batch);
    }
    TrainState st;
    train_state_defaults(&st);
    if (!checkpoint_resume(fuzz_path("ckpt"), &bk, &c, &st)) { fuzz_fail("valid checkpoint 1 was not loaded"); }
    if (st.step != 1 && st.step != 2) { fuzz_fail("resumed at step %d", st.step); }
    if (st.opt_steps < 0 || st.opt_steps > st.step) { fuzz_fail("%d AdamW updates after %d steps", st.opt_steps, st.step); }
    // what the training loop does next with the loaded state: the data position and the guard
    long long w = dataloader_train_window(st.step, 0, 0, 1, st.B, st.total_batch / st.T);
    if (w < 0) { fuzz_fail("data window %lld", w); }
    char reason[256];
    for (int i = 0; i < 3; i++) { guard_check(&st.guard, 5.0f + (float)i, 1.0f, reason, sizeof(reason)); }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (bk.num_params == 0) { setup(); }
    int is_done = size >= 4 && memcmp(data, "step", 4) == 0;
    fuzz_write("ckpt/state_00000002_00000.bin", is_done ? (const uint8_t *)valid_state2 : data,
               is_done ? valid_state2_len : size);
    fuzz_write("ckpt/DONE_00000002", is_done ? data : (const uint8_t *)valid_done2, is_done ? size : valid_done2_len);
    // odd sizes resume as one ZeRO shard of a larger run (a range in the middle of the parameters)
    bk.opt_offset = size % 2 ? bk.num_params / 3 : 0;
    bk.opt_count = size % 2 ? bk.num_params / 2 : bk.num_params;
    if (fuzz_call(resume, NULL)) { fuzz_end(); }
    return 0;
}
