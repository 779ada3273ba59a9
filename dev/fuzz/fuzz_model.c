// libFuzzer harness: the model .bin (version 3 and 5) and the model descriptors (llmc/model_io.h).
// The input is a model file: probed, checksummed and loaded as fp32 and as bf16. Its first line
// is also parsed as a descriptor (-e d12, -e L2:C64:H4): a config accepted from either is checked
// against the limits every size computation relies on.
#include "fuzz.h"
#include "../../llmc/model_io.h"

static void check_config(const GPT2Config *c) {
    if (gpt2_config_problem(c) != NULL) { fuzz_fail("an accepted config fails gpt2_config_problem"); }
    if (gpt2_num_params(c) >= ((size_t)1 << 53)) { fuzz_fail("an accepted config has %zu parameters", gpt2_num_params(c)); }
}

static void load_model(void *arg) {
    const char *path = (const char *)arg;
    ModelFileInfo info;
    model_file_info(path, &info);
    check_config(&info.config);
    model_file_verify(path, &info);
    float *fp32 = (float *)mallocCheck(info.num_params * sizeof(float));
    uint16_t *bf16 = (uint16_t *)mallocCheck(info.num_params * sizeof(uint16_t));
    model_file_load(path, &info, fp32, bf16);
    free(fp32);
    free(bf16);
}

static void parse_descriptor(void *arg) {
    GPT2Config c;
    if (gpt2_parse_descriptor((const char *)arg, &c)) { check_config(&c); }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char desc[64];
    size_t n = 0;
    while (n < size && n < sizeof(desc) - 1 && data[n] != '\n' && data[n] != '\0') { desc[n] = (char)data[n]; n++; }
    desc[n] = '\0';
    if (fuzz_call(parse_descriptor, desc)) { fuzz_end(); }
    const char *path = fuzz_write("model.bin", data, size);
    if (fuzz_call(load_model, (void *)path)) { fuzz_end(); }
    return 0;
}
