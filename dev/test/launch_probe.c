/*
 * What a launcher gives a rank, seen through the trainers' own host code, for launches the CPU
 * trainer cannot train under (several processes without MPI: srun without PMI, torchrun; it has
 * no all-reduce of its own there). Takes the trainers' flags; for each rank prints one line
 *
 *   probe rank R of W local L host H launcher K token T
 *
 * (rank discovery: llmc/processes.h, with -pn/-pr/-pg; T: the value rank 0 drew, received through the
 * bootstrap -pi chooses, as train_gpt2cu receives the NCCL id), then one line per
 * micro-step of the first optimizer step,
 *
 *   probe rank R batch M windows A..Z crc C
 *
 * (M: the global micro-batch it reads, llmc/dataloader.h's layout; C: CRC-32 of its input tokens),
 * so that a test can check that the ranks together read what one process reads. LAUNCH_PROBE_HOLD=S:
 * each process stays S seconds after the bootstrap (as a trainer would train), for processes that come late.
 *   dev/test/launch_probe -i <shards> -b B -t T -d D [the other flags of the trainers]
 */
#include <time.h>
#include "../../llmc/args.h"
#include "../../llmc/processes.h"
#include "../../llmc/dataloader.h"

int main(int argc, char **argv) {
    Comm c;
    comm_init(&c, &argc, &argv);
    TrainArgs a;
    args_parse(&a, argc, argv);
    comm_apply_args(&c, &a);
    const int A = args_grad_accum(&a, c.world_size);
    uint64_t token = 0;
    if (c.world_size > 1 && !c.mpi) {
        if (c.rank == 0) { token = (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)getpid(); }
        comm_bootstrap_bcast(&c, &token, sizeof(token), "token");
    }
    char host[256];
    llmc_hostname(host, sizeof(host), "?");
    const char *hold = getenv("LAUNCH_PROBE_HOLD");
    if (hold) { sleep((unsigned)atoi(hold)); }
    printf("probe rank %d of %d local %d host %s launcher %s token %llu\n", c.rank, c.world_size, c.local_rank, host,
           c.launcher, (unsigned long long)token);
    DataLoader dl;
    dataloader_init(&dl, a.train_glob, "-i", a.T, 50257, a.shuffle, a.seed);
    const long long N = a.total_batch / a.T;
    int *inputs = (int *)mallocCheck((size_t)a.B * a.T * sizeof(int));
    int *targets = (int *)mallocCheck((size_t)a.B * a.T * sizeof(int));
    for (int k = 0; k < A; k++) {
        long long w = dataloader_train_window(0, k, c.rank, c.world_size, a.B, N);
        dataloader_read(&dl, w, a.B, inputs, targets);
        printf("probe rank %d batch %d windows %lld..%lld crc %08x\n", c.rank, k * c.world_size + c.rank, w, w + a.B - 1,
               crc32_update(0, inputs, (size_t)a.B * a.T * sizeof(int)));
    }
    fflush(stdout);
    free(inputs);
    free(targets);
    dataloader_free(&dl);
    comm_finalize(&c);
    return 0;
}
