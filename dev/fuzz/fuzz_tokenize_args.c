// libFuzzer harness: gpt2_tokenize's command line (dev/data/gpt2_tokenize.c, main), run on the
// small files of tool_args.h: every flag and value, every mode, any file (also the FIFO and the
// folder there) in any role. Without a finding, a command line ends in an output or one error.
#include "fuzz.h"
#define main gpt2_tokenize_main
#include "../data/gpt2_tokenize.c"
#undef main
#include "tool_args.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tool_fuzz_one(data, size, "gpt2_tokenize", gpt2_tokenize_main);
    return 0;
}
