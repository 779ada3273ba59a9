// libFuzzer harness: export_hf's command line (dev/eval/export_hf.c, main), both ways, run on the
// small files of tool_args.h (model .bin v3 and v5, a Hugging Face folder, a bare .safetensors,
// OpenAI-format tokenizer files, the FIFO and the folder). Without a finding, a command line ends
// in an output or one error.
#include "fuzz.h"
#define main export_hf_main
#include "../eval/export_hf.c"
#undef main
#include "tool_args.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tool_fuzz_one(data, size, "export_hf", export_hf_main);
    return 0;
}
