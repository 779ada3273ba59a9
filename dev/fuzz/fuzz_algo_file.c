// libFuzzer harness: -mt 1's file of matmul algorithm choices (llmc/matmul_algo_file.h), which the
// CUDA trainer reads from -o at its start. The input is the file. The reader runs as the trainer
// would, with records of the trainer's sizes (an 80-byte key, cuBLASLt's 64-byte algorithm) and
// room for 256, for the GPU of the seed (the simulator's), or for the GPU the input's own header
// names (odd sizes), so that the checks past the origin are reached too. A file it accepts must
// hold at most that room, and writing its records back and reading them again must give the same.
#include "fuzz.h"
#include "../../llmc/matmul_algo_file.h"

#define KEY_BYTES 80
#define ALGO_BYTES 64
#define MAX_RECORDS 256

static unsigned char records[MAX_RECORDS * (KEY_BYTES + ALGO_BYTES + ALGO_FILE_TIMES_BYTES)];
static unsigned char again[sizeof(records)];

static void read_file(void *arg) {
    FuzzBytes *in = (FuzzBytes *)arg;
    AlgoOrigin here;
    memset(&here, 0, sizeof(here));
    snprintf(here.device, sizeof(here.device), "host simulator");
    here.sm_count = 1;
    here.cublaslt_version = 130000;
    if (in->size % 2 == 1 && in->size >= ALGO_FILE_HEADER_BYTES) {  // the origin the file claims
        memcpy(&here.sm_count, in->data + 12, 4);
        memcpy(&here.cublaslt_version, in->data + 16, 8);
        memcpy(here.device, in->data + ALGO_FILE_FIXED_BYTES, ALGO_FILE_DEVICE_BYTES - 1);
    }
    const char *path = fuzz_write("matmul_algos_00000.bin", in->data, in->size);
    char why[512];
    const int n = algo_file_read(path, &here, KEY_BYTES, ALGO_BYTES, records, MAX_RECORDS, why, sizeof(why));
    if (n < -2 || n > MAX_RECORDS) { fuzz_fail("algo_file_read returned %d", n); }
    if (n == -2 && (why[0] == '\0' || strchr(why, '\n'))) { fuzz_fail("a refusal without its one-phrase reason"); }
    if (n < 0) { return; }
    const char *copy = fuzz_path("matmul_algos_copy.bin");
    char err[4600];
    if (algo_file_write(copy, &here, KEY_BYTES, ALGO_BYTES, records, n, err, sizeof(err)) != 0) {
        fuzz_fail("writing %d records back: %s", n, err);
    }
    const size_t bytes = (size_t)n * algo_file_record_bytes(KEY_BYTES, ALGO_BYTES);
    const int m = algo_file_read(copy, &here, KEY_BYTES, ALGO_BYTES, again, MAX_RECORDS, why, sizeof(why));
    if (m != n || memcmp(records, again, bytes) != 0) { fuzz_fail("%d records written back read as %d (%s)", n, m, why); }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FuzzBytes in = {data, size};
    memset(records, 0, sizeof(records));
    memset(again, 0, sizeof(again));
    if (fuzz_call(read_file, &in)) { fuzz_end(); }
    return 0;
}
