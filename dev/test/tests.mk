# The test suite (README "Testing"), included by the top-level Makefile, which defines the
# compilers, the probes and the product targets. Every test-* target is one script or binary
# that fails loudly; `make test` runs TEST_TARGETS, all of which need no GPU.

FIXTURES = dev/test/fixtures
SHARED_DATA ?= ../shared/data
# a test that cannot run here: SKIPPED with a hint, or with CI=true a failure (dev/test/lib.sh)
SKIP_OR_FAIL = bash -c '. dev/test/lib.sh --tools && skip_or_fail "$$@"' skip_or_fail
NVCC_HINT = install the CUDA toolkit 12 or 13 (https://developer.nvidia.com/cuda-downloads) or put nvcc on PATH

# in the order make test starts them, the longest first (two at a time, the lanes then end together;
# by the times of CI's run of d8cc65d: test-cuda-trainer-sim 334 s, test-resume 179, test-sanitize
# 167, test-aarch64 125, test-torch-ddp 100); the waiting ones (TEST_WAITING) have a lane of their own
TEST_TARGETS = test-cuda-trainer-sim test-resume test-sanitize test-aarch64 test-torch-ddp test-fuzz test-gpu-script \
               test-finetune test-cuda-sim test-books-smoke test-model test-tokenizer test-generate test-cpu-matmul \
               test-data test-build test-plan test-muon test-export test-bad-input test-run-state test-cuda-host \
               test-prebuilt test-plot test-hellaswag test-cuda-build test-attention-sim test-bench-tools test-tensorboard \
               test-init test-setup test-loader \
               test-multihost test-hang test-checkpoints test-bootstrap test-mpi

.PHONY: test test-builds fixtures fixtures-cuda aarch64-programs $(TEST_TARGETS) test-gpu bench-gpu bench-tokenizer cuda-kernels fuzz fuzz-build sim-coverage

# every test, two at a time (dev/test/run_suite.sh: one line per test, each one's output in
# build/test-logs/), after one make of all they build: each test's own prerequisites, and
# test-builds for what their recipes build with a sub-make. `make test-<name>` runs one test alone.
test:
	@TEST_WAITING="$(TEST_WAITING)" bash dev/test/run_suite.sh $(TEST_TARGETS)

# the tests that spend most of their time waiting (timeouts, hangs, SLURM and its requeue hold, the
# bootstrap's deadlines; under a fifth of their time on a core): run_suite.sh runs them one after
# another in a third lane beside the two
TEST_WAITING = test-multihost test-hang test-checkpoints test-bootstrap test-mpi

# run_suite.sh's list of what to build first ("prerequisite <name>" lines): test-builds (the longest
# builds: first), then the test targets' prerequisites, from make's own database of them
test-prerequisites:
	@echo "prerequisite test-builds"
	@$(MAKE) -pq --no-print-directory $(TEST_TARGETS) 2> /dev/null | sed -n 's/^\(test-[a-z-]*\): \(.*\)/\1 \2/p' \
	    | awk 'index(" $(TEST_TARGETS) ", " " $$1 " ") { for (i = 2; i <= NF; i++) if ($$i != "|") print "prerequisite " $$i }' | sort -u

# what the tests' recipes build with a sub-make, each its own target so that make -j runs them side
# by side (the CUDA binaries, the longest, first): the CUDA binaries, the fuzz harnesses, and the
# simulated kernels and trainer, after the one rewritten source tree they share
test-builds: test-builds-cuda test-builds-fuzz test-builds-sim test-builds-sim-trainer
.PHONY: test-builds-cuda test-builds-fuzz test-builds-sim test-builds-sim-trainer test-builds-sim-src
test-builds-cuda:
ifneq ($(NVCC),)
	$(MAKE) --no-print-directory $(CUDA_BUILD_TARGETS)
endif
test-builds-fuzz:
	$(MAKE) --no-print-directory fuzz-build
test-builds-sim-src:
	$(MAKE) -C dev/cuda $(SIM_BUILD_DIR)/src/.copied
test-builds-sim: test-builds-sim-src
	$(MAKE) -C dev/cuda sim $(SIM_BUILD_DIR)/attention_sim
test-builds-sim-trainer: test-builds-sim-src train_gpt2
	$(MAKE) $(SIM_TRAINER_MAKE)

# ---------------------------------------------------------------------------------------------
# fixtures from the PyTorch reference: a tiny model (fast, many checks), GPT-2 124M (the real
# shapes), a tiny model at T=300 (the CPU attention's query blocks of 128: two whole, one part),
# the tiny model with a vocabulary of 512 (test-aarch64: under qemu GPT-2's 50,257-row LM head
# took 4 of its 5 minutes), and a model with head size 64 (the fused attention's) for the GPU tests

fixtures: $(FIXTURES)/tiny.bin $(FIXTURES)/d12.bin $(FIXTURES)/tiny300.bin $(FIXTURES)/tiny_v512.bin
fixtures-cuda: $(FIXTURES)/tiny64.bin $(FIXTURES)/d12.bin

$(FIXTURES)/tiny.bin: train_gpt2.py
	@mkdir -p $(FIXTURES)
	$(PYTHON) train_gpt2.py --model L2:C64:H4:T128 --seed 1 --write-model $@ \
	  --batch 4 --seq 32 --debug-state $(FIXTURES)/tiny_state.bin --trajectory $(FIXTURES)/tiny_traj.txt --steps 10

$(FIXTURES)/d12.bin: train_gpt2.py
	@mkdir -p $(FIXTURES)
	$(PYTHON) train_gpt2.py --model d12 --seed 2 --write-model $@ \
	  --batch 4 --seq 64 --debug-state $(FIXTURES)/d12_state.bin --trajectory $(FIXTURES)/d12_traj.txt --steps 5 --lr 1e-4

$(FIXTURES)/tiny300.bin: train_gpt2.py
	@mkdir -p $(FIXTURES)
	$(PYTHON) train_gpt2.py --model L2:C64:H4:T512 --seed 3 --write-model $@ \
	  --batch 2 --seq 300 --debug-state $(FIXTURES)/tiny300_state.bin --trajectory $(FIXTURES)/tiny300_traj.txt --steps 5

$(FIXTURES)/tiny_v512.bin: train_gpt2.py
	@mkdir -p $(FIXTURES)
	$(PYTHON) train_gpt2.py --model L2:C64:H4:T128:V512 --seed 4 --write-model $@ \
	  --batch 4 --seq 32 --debug-state $(FIXTURES)/tiny_v512_state.bin --trajectory $(FIXTURES)/tiny_v512_traj.txt --steps 10

$(FIXTURES)/tiny64.bin: train_gpt2.py
	@mkdir -p $(FIXTURES)
	$(PYTHON) train_gpt2.py --model L2:C128:H2:T128 --seed 1 --write-model $@ \
	  --batch 4 --seq 64 --debug-state $(FIXTURES)/tiny64_state.bin --trajectory $(FIXTURES)/tiny64_traj.txt --steps 10

# ---------------------------------------------------------------------------------------------
# CPU trainer and host code

# the model test against the dependency-free matmul too, so the two builds are held to the same numbers
# (and the OpenBLAS build with each of its kernels: LLMC_CPU_MATMUL, llmc/cpu_matmul.h)
test_gpt2_noblas: test_gpt2.c train_gpt2.c $(CPU_HEADERS) dev/test/model_test.h $(STAMP_OPENMP)
	$(CC) $(CFLAGS) $< -o $@ -lm

test-model: test_gpt2 test_gpt2_noblas fixtures
	./test_gpt2 $(FIXTURES)/tiny.bin $(FIXTURES)/tiny_state.bin $(FIXTURES)/tiny_traj.txt
	if [ -n "$(CPU_BLAS)" ]; then LLMC_CPU_MATMUL=openblas ./test_gpt2 $(FIXTURES)/tiny.bin $(FIXTURES)/tiny_state.bin $(FIXTURES)/tiny_traj.txt nockpt; fi
	./test_gpt2 $(FIXTURES)/d12.bin $(FIXTURES)/d12_state.bin $(FIXTURES)/d12_traj.txt nockpt
	OMP_NUM_THREADS=2 LLMC_CPU_MATMUL=builtin ./test_gpt2 $(FIXTURES)/tiny300.bin $(FIXTURES)/tiny300_state.bin $(FIXTURES)/tiny300_traj.txt nockpt
	./test_gpt2_noblas $(FIXTURES)/tiny.bin $(FIXTURES)/tiny_state.bin $(FIXTURES)/tiny_traj.txt

# the matmuls against a double reference: OpenBLAS (as the trainer is built), the built-in kernel,
# and on x86-64 the built-in kernel at the AVX2 and SSE widths of machines without AVX-512 (AVX2's
# where this CPU can run it)
CPU_MATMUL_TESTS = dev/test/test_cpu_matmul dev/test/test_cpu_matmul_noblas
ifeq ($(shell uname -m),x86_64)
  CPU_MATMUL_TESTS += dev/test/test_cpu_matmul_sse
  ifneq ($(shell grep -m1 -ow 'avx2' /proc/cpuinfo 2>/dev/null),)
    CPU_MATMUL_TESTS += dev/test/test_cpu_matmul_avx2
  endif
endif
dev/test/test_cpu_matmul: dev/test/test_cpu_matmul.c llmc/cpu_matmul.h llmc/utils.h $(STAMP_OPENMP) $(STAMP_OPENBLAS)
	$(CC) $(CFLAGS) $(CPU_BLAS) $< -o $@ $(LDLIBS_CPU)
dev/test/test_cpu_matmul_noblas: dev/test/test_cpu_matmul.c llmc/cpu_matmul.h llmc/utils.h $(STAMP_OPENMP)
	$(CC) $(CFLAGS) $< -o $@ -lm
dev/test/test_cpu_matmul_avx2: dev/test/test_cpu_matmul.c llmc/cpu_matmul.h llmc/utils.h $(STAMP_OPENMP)
	$(CC) $(CFLAGS) -march=x86-64-v3 -mtune=generic $< -o $@ -lm
dev/test/test_cpu_matmul_sse: dev/test/test_cpu_matmul.c llmc/cpu_matmul.h llmc/utils.h $(STAMP_OPENMP)
	$(CC) $(CFLAGS) -march=x86-64 -mtune=generic $< -o $@ -lm

test-cpu-matmul: $(CPU_MATMUL_TESTS)
	@for t in $(CPU_MATMUL_TESTS); do OMP_NUM_THREADS=2 ./$$t || exit 1; done
	@if [ -n "$(CPU_BLAS)" ]; then OMP_NUM_THREADS=2 LLMC_CPU_MATMUL=openblas ./dev/test/test_cpu_matmul && \
	  OMP_NUM_THREADS=2 LLMC_CPU_MATMUL=builtin ./dev/test/test_cpu_matmul; fi
	@out=$$(LLMC_CPU_MATMUL=openblas ./dev/test/test_cpu_matmul_noblas 2>&1); \
	  if [ $$? -ne 0 ] && echo "$$out" | grep -q "^error: LLMC_CPU_MATMUL=openblas: this build has no OpenBLAS"; then \
	    echo "ok   LLMC_CPU_MATMUL=openblas without OpenBLAS: $$out"; \
	  else echo "FAIL: LLMC_CPU_MATMUL=openblas in a build without OpenBLAS: $$out" | head -3; exit 1; fi

dev/test/test_dataloader: dev/test/test_dataloader.c $(CPU_HEADERS) $(STAMP_OPENMP)
	$(CC) $(CFLAGS) $< -o $@ -lm

test-loader: dev/test/test_dataloader
	./dev/test/test_dataloader

# the random init: bitwise the same on 1 and 2 OpenMP threads, and train_gpt2.py's twin of it
dev/test/test_init: dev/test/test_init.c $(CPU_HEADERS) $(STAMP_OPENMP)
	$(CC) $(CFLAGS) $< -o $@ -lm

test-init: dev/test/test_init
ifeq ($(findstring -fopenmp,$(CFLAGS)),)
	@$(SKIP_OR_FAIL) test-init OpenMP "apt-get install libgomp1 (gcc's OpenMP), then make clean && make"
else
	PYTHON=$(PYTHON) bash dev/test/test_init.sh dev/test/test_init
endif


# the build follows the machine's features: a changed set rebuilds, an unchanged one does not
test-build:
	bash dev/test/test_build.sh

test-bad-input: train_gpt2 export_hf $(if $(PCRE2_OK),gpt2_tokenize)
	PYTHON=$(PYTHON) bash dev/test/test_bad_input.sh

# --prompt: greedy text equals the PyTorch reference's; temperature, top-k, seeds; bad input
test-generate: train_gpt2
	PYTHON=$(PYTHON) bash dev/test/test_generate.sh

# the bootstraps of the NCCL id (launches without MPI: TCP, files), with real processes on localhost
dev/test/test_bootstrap: dev/test/test_bootstrap.c llmc/tcp_broadcast.h llmc/fs_broadcast.h llmc/utils.h $(STAMP_OPENMP)
	$(CC) $(CFLAGS) $< -o $@

test-bootstrap: dev/test/test_bootstrap
	./dev/test/test_bootstrap

# CPU ranks under real OpenMPI: rank-count independence, resume, bad launches
test-mpi: train_gpt2 dev/test/launch_probe
	PYTHON=$(PYTHON) bash dev/test/test_mpi.sh

# crash safety, exact resume, preemption, pruning, numeric guards
test-resume: train_gpt2
	PYTHON=$(PYTHON) bash dev/test/test_resume.sh

# what a launcher gives each rank (rank discovery, the TCP bootstrap, the data), for launches without MPI
dev/test/launch_probe: dev/test/launch_probe.c $(CPU_HEADERS) $(STAMP_OPENMP)
	$(CC) $(CFLAGS) $< -o $@ -lm

# two hosts in network namespaces (root): OpenMPI with a hostfile, a real SLURM, a lost host, resume
test-multihost: train_gpt2 dev/test/launch_probe
	PYTHON=$(PYTHON) bash dev/test/test_multihost.sh

# checkpoints in the background (the same bytes as synchronous ones), a disk that fills up (a tmpfs; root)
dev/test/crc_probe: dev/test/crc_probe.c llmc/utils.h $(STAMP_OPENMP)
	$(CC) $(CFLAGS) $< -o $@

test-checkpoints: train_gpt2 dev/test/crc_probe
	PYTHON=$(PYTHON) bash dev/test/test_checkpoints.sh

# a frozen rank (SIGSTOP) ends the job within -pt with a line and a flight record per live rank; resume
dev/test/test_flight_note: dev/test/test_flight_note.c $(CPU_HEADERS)
	$(CC) $(CFLAGS) $< -o $@ -lm

test-hang: train_gpt2 dev/test/test_flight_note
	./dev/test/test_flight_note
	PYTHON=$(PYTHON) bash dev/test/test_hang.sh

# metrics.jsonl, the ETA, evaluation progress, a finished run started again, a changed -x on resume
test-run-state: train_gpt2
	PYTHON=$(PYTHON) bash dev/test/test_run_state.sh

# the memory plan against the measured peak RSS, -b auto, the phase timers; train_gpt2cu's plan without a GPU
test-plan: train_gpt2 $(if $(NVCC),train_gpt2cu)
	PYTHON=$(PYTHON) bash dev/test/test_plan.sh

# -tb 1: TensorBoard's own reader (PyPI tensorboard) against main.log; resumes, truncated files
test-tensorboard: train_gpt2
	PYTHON=$(PYTHON) bash dev/test/test_tensorboard.sh

# HellaSwag scoring against the PyTorch reference, on 1-3 ranks
test-hellaswag: train_gpt2
	PYTHON=$(PYTHON) bash dev/test/test_hellaswag.sh

# train_gpt2.py, the PyTorch DDP twin (1 and 2 gloo ranks), against train_gpt2 under mpirun; checkpoints both ways
# (and the twin's sampling against llmc/generate.h's, built as the trainers build it)
dev/test/sample_probe: dev/test/sample_probe.c $(CPU_HEADERS) $(STAMP_OPENMP)
	$(CC) $(CFLAGS) $< -o $@ -lm

test-torch-ddp: train_gpt2 dev/test/sample_probe
	PYTHON=$(PYTHON) bash dev/test/test_torch_ddp.sh

# -opt muon: Newton-Schulz against numpy's SVD, train_gpt2 against train_gpt2.py, checkpoints, rank
# counts, bad flags (the simulated CUDA trainer's Muon: test-cuda-trainer-sim)
dev/test/newton_schulz: dev/test/newton_schulz.c train_gpt2.c $(CPU_HEADERS)
	$(CC) $(CFLAGS) $(CPU_BLAS) $(MPI_CFLAGS) $< -o $@ $(LDLIBS_CPU) $(MPI_LDLIBS)

test-muon: train_gpt2 dev/test/newton_schulz
	PYTHON=$(PYTHON) bash dev/test/test_muon.sh

# ---------------------------------------------------------------------------------------------
# data, tokenizer, export, plots (tiktoken and transformers on $(PYTHON) are the references)

test-tokenizer: gpt2_tokenize
	PYTHON=$(PYTHON) bash dev/test/test_tokenizer.sh

test-data: gpt2_tokenize
	PYTHON=$(PYTHON) bash dev/test/test_data.sh

test-export: export_hf
	PYTHON=$(PYTHON) bash dev/test/test_export.sh

test-plot:
	PYTHON=$(PYTHON) bash dev/test/test_plot.sh

# the readers of a GPU session's figures (gpu_summary.py, exposed_comm.py) on logs in their formats
test-bench-tools:
	PYTHON=$(PYTHON) bash dev/test/test_bench_tools.sh

# scripts/setup_lib.sh (what the README's two commands install with), on stand-ins for apt and pip
test-setup:
	PYTHON=$(PYTHON) bash dev/test/test_setup.sh

# dev/gpu/prebuilt.sh: whether a GPU session installs the binaries built here or builds its own
test-prebuilt:
	bash dev/test/test_prebuilt.sh

# dev/test/test_gpu.sh, every part, with stand-ins for the CUDA binaries and the GPU tools: the
# script's own faults show here, not in a GPU session
test-gpu-script:
	PYTHON=$(PYTHON) bash dev/test/test_gpu_script.sh

# the CPU smoke version of scripts/run_gpt2_124M_books.sh (needs ../shared/data)
test-books-smoke: train_gpt2 gpt2_tokenize
	SHARED_DATA=$(SHARED_DATA) bash dev/test/test_books_smoke.sh

# scripts/finetune_gpt2.sh offline: a small model in the hub's safetensors layout, converted and
# fine-tuned on Tiny Shakespeare; its starting loss against transformers
test-finetune: train_gpt2 export_hf gpt2_tokenize
	PYTHON=$(PYTHON) bash dev/test/test_finetune.sh

# ---------------------------------------------------------------------------------------------
# CUDA without a GPU: compile everything, and run the kernels on the CPU host simulator

# CI has nvcc but no GPU: every CUDA binary must at least compile (a failed compile fails make test)
CUDA_BUILD_TARGETS = train_gpt2cu test_gpt2cu build/cuda_single/train_gpt2cu build/bench_layers
test-cuda-build:
ifeq ($(NVCC),)
	@$(SKIP_OR_FAIL) test-cuda-build nvcc "$(NVCC_HINT)"
else
	@# two builds at a time, as fuzz-build: the CI machine's two cores (81 s one at a time, 55 s so)
	$(MAKE) --no-print-directory -j2 $(CUDA_BUILD_TARGETS)
ifeq ($(USE_CUDNN),1)
	@# dev/bench/build_llmc.sh builds llm.c against what make cuda-libs names: the cuDNN linked here
	@$(MAKE) --no-print-directory -s cuda-libs | grep -xF "cuda-libs cudnn=$(CUDNN)" > /dev/null \
	    || { echo "test-cuda-build: make cuda-libs does not name the cuDNN the build links ($(CUDNN))" >&2; exit 1; }
endif
	@echo "test-cuda-build: compiled for CUDA_ARCHS=\"$(CUDA_ARCHS)\": train_gpt2cu, test_gpt2cu and build/bench_layers $(if $(USE_CUDNN),with,WITHOUT) cuDNN, the single-GPU variant without$(if $(USE_CUDNN),,; make cudnn-frontend adds the cuDNN variant)"
	@# -at auto's choice in this build, as --plan shows it (no GPU needed): cuDNN's attention from
	@# -t 256 on where the build has it (its workspace 2 B NH T (T+2) bytes, 384.8 MiB for d12 at
	@# B 16, T 1024: the H200's figure), our kernel below and without cuDNN
	@./train_gpt2cu --plan 1 -e d12 -b 16 -t 128 | grep -q "^  attention workspace  *-  *-  none: our kernel" \
	    || { echo "test-cuda-build: -at auto at -t 128 did not take our kernel (--plan's attention row)" >&2; exit 1; }
	@./train_gpt2cu --plan 1 -e d12 -b 16 -t 1024 | grep -q "^  attention workspace  *$(if $(USE_CUDNN),384.8 MiB .*cuDNN's workspace,-  *-  none: our kernel)" \
	    || { echo "test-cuda-build: -at auto at -t 1024 did not take $(if $(USE_CUDNN),cuDNN's attention with its workspace,our kernel)" >&2; exit 1; }
	@echo "test-cuda-build: -at auto takes $(if $(USE_CUDNN),cuDNN's attention at -t 1024 and ours at 128,our kernel: no cuDNN in this build) (--plan)"
endif

# the CPU-only test of the CUDA layers' host logic (no GPU needed; one architecture is enough)
test-cuda-host:
ifeq ($(NVCC),)
	@$(SKIP_OR_FAIL) test-cuda-host nvcc "$(NVCC_HINT)"
else
	$(MAKE) -C dev/cuda run-host CUDA_ARCHS="$(firstword $(CUDA_ARCHS))" NVCC="$(NVCC)"
endif

# The CPU host simulator of CUDA (dev/cuda/sim, built by dev/cuda/Makefile; g++, no CUDA needed):
# the kernel workbenches with the kernels' own source and fibers for threads, in forward, reverse
# and random schedules, under AddressSanitizer (~1 min on 2 cores, after the build); the fused
# attention kernels with their PTX emulated and checked (~10 s); and the whole CUDA trainer
# (train_gpt2.cu, test_gpt2.cu), compared by dev/test/test_cuda_sim.sh with the CPU trainer, the
# PyTorch reference, itself (determinism, resume) and across MPI rank counts (~6 min; the MPI part
# where the simulator build has MPI, which it gets where the CPU trainer does).

test-cuda-sim:
	$(MAKE) -C dev/cuda -j2 sim
	$(MAKE) -C dev/cuda run-sim

test-attention-sim:
	$(MAKE) -C dev/cuda run-attention-sim

SIM_BUILD_DIR = ../../build/cuda_sim
SIM_TRAINER_MAKE = -C dev/cuda -j2 sim-trainer SIM_MPI=$(if $(MPICC),1,0) SIM_STAMPS="$(abspath $(STAMP_MPI) $(STAMP_PCRE2))" \
	    SIM_GEN_FLAGS="$(GEN_FLAGS)" SIM_GEN_LDLIBS="$(GEN_LDLIBS)"
test-cuda-trainer-sim: train_gpt2
	$(MAKE) $(SIM_TRAINER_MAKE)
	PYTHON=$(PYTHON) bash dev/test/test_cuda_sim.sh build/cuda_sim

# ARM64 (aarch64: NVIDIA Grace in a GH200, AWS Graviton, Ampere): the CPU trainer, its model test
# and the CRC cross-compiled by Debian's aarch64 gcc with -Werror (x86-only code
# must be guarded), run under qemu-aarch64 (dev/test/test_aarch64.sh); and the CUDA trainer's host
# code compiled for aarch64 and run as the simulator's trainer. armv8.2-a: every ARM server core
# since Neoverse N1 (Graviton2), CRC32 instructions included. No OpenBLAS or PCRE2 for arm64 here
# (they would need the arm64 archive): the built-in matmul, no --prompt.
AARCH64_CC ?= aarch64-linux-gnu-gcc
AARCH64_CXX ?= aarch64-linux-gnu-g++
AARCH64_BUILD = build/aarch64
AARCH64_CFLAGS = -O2 -march=armv8.2-a $(CFLAGS_COMMON) -fopenmp -Werror
AARCH64_PROGRAMS = $(addprefix $(AARCH64_BUILD)/,train_gpt2 test_gpt2 crc_probe cuda_sim/train_gpt2cu)
$(AARCH64_BUILD)/train_gpt2: train_gpt2.c $(CPU_HEADERS)
	@mkdir -p $(@D)
	$(AARCH64_CC) $(AARCH64_CFLAGS) $< -o $@ -lm
$(AARCH64_BUILD)/test_gpt2: test_gpt2.c train_gpt2.c $(CPU_HEADERS) dev/test/model_test.h
	@mkdir -p $(@D)
	$(AARCH64_CC) $(AARCH64_CFLAGS) $< -o $@ -lm
$(AARCH64_BUILD)/crc_probe: dev/test/crc_probe.c llmc/utils.h
	@mkdir -p $(@D)
	$(AARCH64_CC) $(AARCH64_CFLAGS) $< -o $@
$(AARCH64_BUILD)/cuda_sim/train_gpt2cu: $(wildcard train_gpt2.cu $(CUDA_HEADERS) dev/cuda/sim/*.h dev/cuda/sim/*.cuh)
	$(MAKE) -C dev/cuda SIM_BUILD=../../$(AARCH64_BUILD)/cuda_sim SIM_CXX=$(AARCH64_CXX) SIM_MPI=0 ../../$@
aarch64-programs: $(AARCH64_PROGRAMS)
test-aarch64: fixtures train_gpt2
	PYTHON=$(PYTHON) bash dev/test/test_aarch64.sh

# not a test: the lines of the CUDA trainer that no test of test-cuda-trainer-sim runs, from gcc's
# line coverage of the simulated trainer (dev/cuda/sim_coverage.sh)
sim-coverage: train_gpt2
	$(MAKE) -C dev/cuda -j2 sim-trainer SIM_BUILD=../../build/cuda_sim_cov SIM_CXX="g++ --coverage" \
	    SIM_MPI=$(if $(MPICC),1,0) SIM_STAMPS="$(abspath $(STAMP_MPI) $(STAMP_PCRE2))" \
	    SIM_GEN_FLAGS="$(GEN_FLAGS)" SIM_GEN_LDLIBS="$(GEN_LDLIBS)"
	PYTHON=$(PYTHON) bash dev/cuda/sim_coverage.sh build/cuda_sim_cov

# ---------------------------------------------------------------------------------------------
# bad files: libFuzzer harnesses of every reader of untrusted input (dev/fuzz/README.md), and the
# CPU suite's core under AddressSanitizer and UBSan

FUZZ_CC ?= clang
FUZZ_BUILD := build/fuzz
FUZZ_NAMES := shard model checkpoint tokenizer hellaswag bpe_load bpe_encode tokenize safetensors args fs_bootstrap tcp_bootstrap \
              tokenize_args export_args algo_file
FUZZ_PCRE2 := bpe_load bpe_encode tokenize tokenize_args
FUZZ_SECONDS ?= 60
FUZZ_PARALLEL ?= 2
FUZZ_APT := apt-get install clang libclang-rt-14-dev
FUZZ_FLAGS := -g -O1 -std=gnu11 -D_GNU_SOURCE -Wall -Wno-unused-function -fsanitize=fuzzer,address,undefined \
              -fno-sanitize-recover=all
FUZZ_OK := $(shell printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' | \
             $(FUZZ_CC) -x c - $(FUZZ_FLAGS) -o /dev/null >/dev/null 2>&1 && echo 1)
FUZZ_DEPS = dev/fuzz/fuzz.h dev/fuzz/bpe_check.h dev/fuzz/tool_args.h $(CPU_HEADERS) dev/data/gpt2_tokenize.c dev/eval/export_hf.c

$(FUZZ_BUILD)/fuzz_%: dev/fuzz/fuzz_%.c $(FUZZ_DEPS) $(STAMP_PCRE2)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(if $(filter $*,$(FUZZ_PCRE2)),-DFUZZ_WITH_PCRE2 $(PCRE2_CFLAGS)) $< -o $@ -lm \
	    $(if $(filter $*,$(FUZZ_PCRE2)),$(PCRE2_LDLIBS))

# seeds: small valid files that the project's tools make (dev/fuzz/make_seeds.sh)
$(FUZZ_BUILD)/seeds/.done: dev/fuzz/make_seeds.sh dev/fuzz/make_tiny_bpe.py dev/data/embedded/SHA256SUMS train_gpt2 gpt2_tokenize export_hf train_gpt2.py
	PYTHON=$(PYTHON) bash dev/fuzz/make_seeds.sh $(FUZZ_BUILD)/seeds
	touch $@

# the harnesses and their seeds; without clang's fuzzer runtime: SKIPPED, or an error under CI=true
fuzz-build:
ifeq ($(FUZZ_OK),1)
	$(MAKE) --no-print-directory -j2 $(addprefix $(FUZZ_BUILD)/fuzz_,$(FUZZ_NAMES)) $(FUZZ_BUILD)/seeds/.done
else ifeq ($(CI),true)
	@echo "fuzzing needs clang with libFuzzer and the sanitizer runtimes: $(FUZZ_APT)" >&2; exit 1
else
	@echo "SKIPPED: fuzzing needs clang with libFuzzer and the sanitizer runtimes: $(FUZZ_APT)"
endif

# every harness for FUZZ_SECONDS on its corpus, FUZZ_PARALLEL at a time
fuzz: fuzz-build
ifeq ($(FUZZ_OK),1)
	bash dev/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_PARALLEL) $(FUZZ_NAMES)
endif

# CI: 8 s per harness, two at a time (about 65 s for the 15): each replays its seeds and
# regression inputs and mutates from them; the long runs are make fuzz (dev/fuzz/README.md)
test-fuzz:
	$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=8 FUZZ_PARALLEL=2

# the trainer, the model test and the loader test built with ASan and UBSan (gcc's runtimes)
SAN_BUILD := build/sanitize
# (GCC 12 gives false -Wstringop-overflow warnings on array-of-array pointers under -fsanitize=address)
SAN_FLAGS = $(filter-out -O3,$(CFLAGS)) -O2 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all \
            -Wno-stringop-overflow

$(SAN_BUILD)/train_gpt2: train_gpt2.c $(CPU_HEADERS) $(CPU_STAMPS)
	@mkdir -p $(@D)
	$(CC) $(SAN_FLAGS) $(CPU_BLAS) $(MPI_CFLAGS) $< -o $@ $(LDLIBS_CPU) $(MPI_LDLIBS)

$(SAN_BUILD)/test_gpt2: test_gpt2.c train_gpt2.c $(CPU_HEADERS) dev/test/model_test.h $(CPU_STAMPS)
	@mkdir -p $(@D)
	$(CC) $(SAN_FLAGS) $(CPU_BLAS) $(MPI_CFLAGS) $< -o $@ $(LDLIBS_CPU) $(MPI_LDLIBS)

$(SAN_BUILD)/test_dataloader: dev/test/test_dataloader.c $(CPU_HEADERS) $(STAMP_OPENMP)
	@mkdir -p $(@D)
	$(CC) $(SAN_FLAGS) $< -o $@ -lm

# the trainer under ThreadSanitizer (dev/test/test_threads.sh): with MPI, without OpenMP and OpenBLAS
# (TSan cannot see their threads synchronize), -O1 as TSan's own advice
TSAN_FLAGS = $(filter-out -O3 -fopenmp,$(CFLAGS)) -O1 -g -fno-omit-frame-pointer -fsanitize=thread

$(SAN_BUILD)/train_gpt2_tsan: train_gpt2.c $(CPU_HEADERS) $(CPU_STAMPS)
	@mkdir -p $(@D)
	$(CC) $(TSAN_FLAGS) $(MPI_CFLAGS) $< -o $@ -lm -lpthread $(MPI_LDLIBS)

# the tiny model tests (T=32 and 300), the loader, bad input and resume; the threads: every sanitizer report fails the target
test-sanitize: $(SAN_BUILD)/train_gpt2 $(SAN_BUILD)/test_gpt2 $(SAN_BUILD)/test_dataloader $(SAN_BUILD)/train_gpt2_tsan $(FIXTURES)/tiny.bin $(FIXTURES)/tiny300.bin export_hf
	PYTHON=$(PYTHON) bash dev/test/test_sanitize.sh $(SAN_BUILD) $(FIXTURES)

# ---------------------------------------------------------------------------------------------
# on a machine with a GPU (dev/test/test_gpu.sh runs all of it in one go), and benchmarks

# with each attention implementation of the build (LLMC_ATTENTION=own, and cudnn where built)
test-gpu: test_gpt2cu fixtures-cuda
	set -e; for at in own $(if $(USE_CUDNN),cudnn); do for f in tiny64 d12; do \
	    LLMC_ATTENTION=$$at ./test_gpt2cu $(FIXTURES)/$$f.bin $(FIXTURES)/$${f}_state.bin $(FIXTURES)/$${f}_traj.txt; \
	done; done

# the kernel workbenches of dev/cuda (run them on a GPU machine with dev/cuda/run_all.sh)
cuda-kernels: $(CUDNN_DEP)
ifeq ($(NVCC),)
	@echo "cuda-kernels: nvcc not found; install the CUDA toolkit or put nvcc on PATH" >&2; exit 1
else
	$(MAKE) -C dev/cuda CUDA_ARCHS="$(CUDA_ARCHS)" NVCC="$(NVCC)" $(if $(USE_CUDNN),CUDNN_ATT_OBJ="$(abspath $(CUDNN_OBJ))" \
	    NVCC_FLAGS_attention="-DUSE_CUDNN" LIBS_attention="$(abspath $(CUDNN_OBJ)) $(call link_dev,$(CUDNN)) $(call link_dev,$(NVRTC))")
endif

bench-gpu:
	bash dev/bench/bench_gpu.sh

# what the watchdog's polling adds to a host wait, on the CPU (dev/bench/RESULTS.md, "Watchdog polling")
build/bench_poll: dev/bench/bench_poll.c llmc/utils.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $< -o $@ -lpthread

# ours vs tiktoken on the 98 MB book corpus (dev/bench/RESULTS.md, "Tokenizer")
bench-tokenizer: gpt2_tokenize
	PYTHON=$(PYTHON) bash dev/bench/bench_tokenizer.sh
