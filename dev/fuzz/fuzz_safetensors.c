// libFuzzer harness: the safetensors import of export_hf (dev/eval/export_hf.c, --to-bin), its
// JSON reader included. The input is a model.safetensors, optionally followed by the separator
// line "--8<--" and a config.json. A file that imports must give a model .bin that the trainers
// load.
#include "fuzz.h"
#define main export_hf_main
#include "../eval/export_hf.c"
#undef main

static void import(void *arg) {
    (void)arg;
    char in[600], out[600];
    snprintf(in, sizeof(in), "%s", fuzz_path("hf"));
    snprintf(out, sizeof(out), "%s", fuzz_path("imported.bin"));
    import_from_hf(in, out, MODEL_VERSION_FP32, 0, 1);
    ModelFileInfo info;
    model_file_info(out, &info);
    float *params = (float *)mallocCheck(info.num_params * sizeof(float));
    model_file_load(out, &info, params, NULL);
    free(params);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t st_len, cfg_len;
    const uint8_t *cfg;
    fuzz_split(data, size, &st_len, &cfg, &cfg_len);
    make_dirs(fuzz_path("hf"));
    fuzz_write("hf/model.safetensors", data, st_len);
    if (cfg_len > 0) { fuzz_write("hf/config.json", cfg, cfg_len); } else { unlink(fuzz_path("hf/config.json")); }
    if (fuzz_call(import, NULL)) { fuzz_end(); }
    return 0;
}
