// libFuzzer harness: the trainers' flag parser (llmc/args.h, args_parse) and the batch arithmetic
// that follows it; and, read as torchrun's command line, processes.h's search of it for
// --shutdown-timeout. The input is the command line: arguments separated by NUL bytes. args.h ends a
// bad command line with one error line ("... (see --help)") and exit(1), which here returns to the
// harness like llmc_die.
#include "fuzz.h"
#include "../../llmc/model_io.h"

// noreturn as args.h's args_fail, which ends in exit()
static LLMC_NORETURN void fuzz_exit(int code) {
    (void)code;
    llmc_abort_hook();  // set while fuzz_call runs: back to the harness
    __builtin_unreachable();
}
#define exit(code) fuzz_exit(code)
#include "../../llmc/args.h"
#undef exit
#include "../../llmc/processes.h"

#define MAX_ARGS 64

typedef struct {
    int argc;
    char **argv;
    int world;
} ArgsCase;

static void parse(void *arg) {
    ArgsCase *c = (ArgsCase *)arg;
    TrainArgs a;
    args_parse(&a, c->argc, c->argv);
    if (a.B == ARGS_AUTO) { a.B = 1 + c->world; }  // -b auto: resolved by the memory plan (llmc/plan.h); any B here
    int accum = args_grad_accum(&a, c->world);  // -d is checked here, against B, T and the ranks
    if (a.B < 1 || a.T < 1 || a.gen_tokens < 1) { fuzz_fail("accepted B=%d T=%d g=%d", a.B, a.T, a.gen_tokens); }
    if (accum < 1 || (long long)accum * a.B * a.T * c->world != a.total_batch) {
        fuzz_fail("%d accumulation steps for d=%lld B=%d T=%d W=%d", accum, a.total_batch, a.B, a.T, c->world);
    }
    GPT2Config cfg;
    gpt2_parse_descriptor(a.model, &cfg);
    args_hash(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    // the arguments, NUL-terminated, in one buffer the parser may keep pointers into
    char *buf = (char *)malloc(size + 1);
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = (char *)"train_gpt2";
    for (size_t i = 0; i <= size && argc <= MAX_ARGS; i += strlen(buf + i) + 1) { argv[argc++] = buf + i; }
    argv[argc] = NULL;
    const double grace = comm_cmdline_shutdown_timeout(buf, size);
    if (grace != -1.0 && !(grace >= 0 && grace <= 1000000)) { fuzz_fail("--shutdown-timeout read as %g", grace); }
    ArgsCase c = {argc, argv, 1 + (int)(size % 4)};
    if (fuzz_call(parse, &c)) { fuzz_end(); }
    free(buf);
    return 0;
}
