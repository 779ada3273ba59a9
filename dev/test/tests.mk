# The test suite (README "Testing"), included by the top-level Makefile, which defines the
# compilers, the probes and the product targets. Every test-* target is one script or binary
# that fails loudly; `make test` runs TEST_TARGETS, all of which need no GPU.

FIXTURES = dev/test/fixtures
SHARED_DATA ?= ../shared/data
# a test that cannot run here: SKIPPED with a hint, or with CI=true a failure (dev/test/lib.sh)
SKIP_OR_FAIL = bash -c '. dev/test/lib.sh --skip-only && skip_or_fail "$$@"' skip_or_fail
NVCC_HINT = install the CUDA toolkit 12 or 13 (https://developer.nvidia.com/cuda-downloads) or put nvcc on PATH

TEST_TARGETS = test-model test-loader test-bad-input test-bootstrap test-mpi test-resume test-hellaswag \
               test-tokenizer test-data test-export test-plot test-books-smoke \
               test-cuda-build test-cuda-host test-cuda-sim test-attention-sim test-cuda-trainer-sim

.PHONY: test fixtures fixtures-cuda $(TEST_TARGETS) test-gpu bench-gpu bench-tokenizer cuda-kernels

test: $(TEST_TARGETS)
	@echo "make test: all tests passed"

# ---------------------------------------------------------------------------------------------
# fixtures from the PyTorch reference: a tiny model (fast, many checks), GPT-2 124M (the real
# shapes), and a model with head size 64 (the fused attention's) for the GPU tests

fixtures: $(FIXTURES)/tiny.bin $(FIXTURES)/d12.bin
fixtures-cuda: $(FIXTURES)/tiny64.bin $(FIXTURES)/d12.bin

$(FIXTURES)/tiny.bin: train_gpt2.py
	@mkdir -p $(FIXTURES)
	$(PYTHON) train_gpt2.py --model L2:C64:H4:T128 --seed 1 --write-model $@ \
	  --batch 4 --seq 32 --debug-state $(FIXTURES)/tiny_state.bin --trajectory $(FIXTURES)/tiny_traj.txt --steps 10

$(FIXTURES)/d12.bin: train_gpt2.py
	@mkdir -p $(FIXTURES)
	$(PYTHON) train_gpt2.py --model d12 --seed 2 --write-model $@ \
	  --batch 4 --seq 64 --debug-state $(FIXTURES)/d12_state.bin --trajectory $(FIXTURES)/d12_traj.txt --steps 5 --lr 1e-4

$(FIXTURES)/tiny64.bin: train_gpt2.py
	@mkdir -p $(FIXTURES)
	$(PYTHON) train_gpt2.py --model L2:C128:H2:T128 --seed 1 --write-model $@ \
	  --batch 4 --seq 64 --debug-state $(FIXTURES)/tiny64_state.bin --trajectory $(FIXTURES)/tiny64_traj.txt --steps 10

# ---------------------------------------------------------------------------------------------
# CPU trainer and host code

# the model test against the dependency-free matmul too, so the two builds are held to the same numbers
test_gpt2_noblas: test_gpt2.c train_gpt2.c $(CPU_HEADERS) dev/test/model_test.h
	$(CC) $(CFLAGS) $< -o $@ -lm

test-model: test_gpt2 test_gpt2_noblas fixtures
	./test_gpt2 $(FIXTURES)/tiny.bin $(FIXTURES)/tiny_state.bin $(FIXTURES)/tiny_traj.txt
	./test_gpt2 $(FIXTURES)/d12.bin $(FIXTURES)/d12_state.bin $(FIXTURES)/d12_traj.txt nockpt
	./test_gpt2_noblas $(FIXTURES)/tiny.bin $(FIXTURES)/tiny_state.bin $(FIXTURES)/tiny_traj.txt

dev/test/test_dataloader: dev/test/test_dataloader.c $(CPU_HEADERS)
	$(CC) $(CFLAGS) $< -o $@ -lm

test-loader: dev/test/test_dataloader
	./dev/test/test_dataloader

test-bad-input: train_gpt2
	PYTHON=$(PYTHON) bash dev/test/test_bad_input.sh

# the TCP bootstrap of the NCCL id (launches without MPI), with real processes on localhost
dev/test/test_bootstrap: dev/test/test_bootstrap.c llmc/bootstrap.h llmc/utils.h
	$(CC) $(CFLAGS) $< -o $@

test-bootstrap: dev/test/test_bootstrap
	./dev/test/test_bootstrap

# CPU ranks under real OpenMPI: rank-count independence, resume, bad launches
test-mpi: train_gpt2
	PYTHON=$(PYTHON) bash dev/test/test_mpi.sh

# crash safety, exact resume, preemption, pruning, numeric guards
test-resume: train_gpt2
	PYTHON=$(PYTHON) bash dev/test/test_resume.sh

# HellaSwag scoring against the PyTorch reference, on 1-3 ranks
test-hellaswag: train_gpt2
	PYTHON=$(PYTHON) bash dev/test/test_hellaswag.sh

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

# the CPU smoke version of scripts/run_gpt2_124M_books.sh (needs ../shared/data)
test-books-smoke: train_gpt2 gpt2_tokenize
	SHARED_DATA=$(SHARED_DATA) bash dev/test/test_books_smoke.sh

# ---------------------------------------------------------------------------------------------
# CUDA without a GPU: compile everything, and run the kernels on the CPU host simulator

# CI has nvcc but no GPU: every CUDA binary must at least compile (a failed compile fails make test)
test-cuda-build:
ifeq ($(NVCC),)
	@$(SKIP_OR_FAIL) test-cuda-build nvcc "$(NVCC_HINT)"
else
	$(MAKE) --no-print-directory train_gpt2cu test_gpt2cu build/cuda_single/train_gpt2cu
	@echo "test-cuda-build: train_gpt2cu, test_gpt2cu and the single-GPU variant compiled for CUDA_ARCHS=\"$(CUDA_ARCHS)\""
endif

# the CPU-only test of the CUDA layers' host logic (no GPU needed; one architecture is enough)
test-cuda-host:
ifeq ($(NVCC),)
	@$(SKIP_OR_FAIL) test-cuda-host nvcc "$(NVCC_HINT)"
else
	$(MAKE) -C dev/cuda run-host CUDA_ARCHS="$(firstword $(CUDA_ARCHS))" NVCC="$(NVCC)"
endif

# the kernel workbenches on the CPU host simulator (g++, AddressSanitizer; no CUDA needed):
# the kernels' own source run with fibers for threads, in forward and random schedules (~2 min)
test-cuda-sim:
	$(MAKE) -C dev/cuda run-sim SIM_ORDERS="forward random"

# the fused attention kernels on their PTX-level CPU simulator (~15 s)
test-attention-sim:
	$(MAKE) -C dev/cuda run-attention-sim

# The whole CUDA trainer on the CPU host simulator (dev/test/test_cuda_sim.sh): train_gpt2.cu and
# test_gpt2.cu compiled by g++ against dev/cuda/sim (kernels from their own source, fibers for
# threads) with the attention stand-in of dev/test/sim/trainer_sim.h; compared with the CPU
# trainer, the PyTorch reference, itself (determinism, resume) and across MPI rank counts.
SIMT := build/cuda_sim_trainer
SIMT_LLMC = $(filter-out attention.cuh,$(notdir $(wildcard llmc/*.h llmc/*.cuh)))
SIMT_MPI := $(if $(MPICC),-DUSE_MPI -DOMPI_SKIP_MPICXX=1 $(shell mpicc --showme:compile 2>/dev/null))
SIMT_MPI_LIBS := $(if $(MPICC),$(shell mpicc --showme:link 2>/dev/null))
SIMT_FLAGS = -std=c++17 -ffp-contract=off -DLLMC_HOST_SIM -D_GNU_SOURCE -Idev/cuda/sim -I$(SIMT) \
             -include dev/test/sim/trainer_sim.h $(SIMT_MPI)
SIMT_DEPS = $(SIMT)/.sources dev/test/sim/trainer_sim.h $(wildcard dev/cuda/sim/*.h)

# sim_rewrite.py changes only the <<<>>> launch syntax; attention.cuh is copied as is, its include
# guard is set by the stand-in
$(SIMT)/.sources: train_gpt2.cu test_gpt2.cu $(CUDA_HEADERS) dev/test/model_test.h dev/cuda/sim/sim_rewrite.py
	rm -rf $(SIMT)/llmc && mkdir -p $(SIMT)/dev/test
	python3 dev/cuda/sim/sim_rewrite.py llmc $(SIMT)/llmc $(SIMT_LLMC)
	cp llmc/attention.cuh $(SIMT)/llmc/
	cp train_gpt2.cu test_gpt2.cu $(SIMT)/
	cp dev/test/model_test.h $(SIMT)/dev/test/
	touch $@

$(SIMT)/train_gpt2cu: $(SIMT_DEPS)
	g++ $(SIMT_FLAGS) -O2 -g -x c++ $(SIMT)/train_gpt2.cu -o $@ $(SIMT_MPI_LIBS)

# AddressSanitizer and UBSan: out-of-bounds pointers and strides show up here (slower: short runs)
$(SIMT)/train_gpt2cu_asan: $(SIMT_DEPS)
	g++ $(SIMT_FLAGS) -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined \
	    -x c++ $(SIMT)/train_gpt2.cu -o $@ $(SIMT_MPI_LIBS)

$(SIMT)/test_gpt2cu: $(SIMT_DEPS)
	g++ $(SIMT_FLAGS) -O2 -g -x c++ $(SIMT)/test_gpt2.cu -o $@ $(SIMT_MPI_LIBS)

test-cuda-trainer-sim: train_gpt2 $(SIMT)/train_gpt2cu $(SIMT)/train_gpt2cu_asan $(SIMT)/test_gpt2cu
	PYTHON=$(PYTHON) SIM_MPI=$(if $(MPICC),1,0) bash dev/test/test_cuda_sim.sh $(SIMT)

# ---------------------------------------------------------------------------------------------
# on a machine with a GPU (dev/test/test_gpu.sh runs all of it in one go), and benchmarks

test-gpu: test_gpt2cu fixtures-cuda
	./test_gpt2cu $(FIXTURES)/tiny64.bin $(FIXTURES)/tiny64_state.bin $(FIXTURES)/tiny64_traj.txt
	./test_gpt2cu $(FIXTURES)/d12.bin $(FIXTURES)/d12_state.bin $(FIXTURES)/d12_traj.txt

# the kernel workbenches of dev/cuda (run them on a GPU machine with dev/cuda/run_all.sh)
cuda-kernels:
ifeq ($(NVCC),)
	@echo "cuda-kernels: nvcc not found; install the CUDA toolkit or put nvcc on PATH" >&2; exit 1
else
	$(MAKE) -C dev/cuda CUDA_ARCHS="$(CUDA_ARCHS)" NVCC="$(NVCC)"
endif

bench-gpu:
	bash dev/bench/bench_gpu.sh

# ours vs tiktoken on the 98 MB book corpus (dev/bench/RESULTS.md, "Tokenizer")
bench-tokenizer: gpt2_tokenize
	PYTHON=$(PYTHON) bash dev/bench/bench_tokenizer.sh
