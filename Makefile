# GPT-2 trainers in C and CUDA.
#
#   make              build everything this machine can build (CUDA targets only if nvcc is found)
#   make test         the test suite; needs no GPU (README: "Testing")
#   make test_gpt2cu  the GPU test binary (run it on a machine with a GPU)
#
# Options (make VAR=1):
#   NO_BLAS=1       CPU matmuls without OpenBLAS (dependency-free, slower)
#   NO_OMP=1        no OpenMP
#   NO_MPI=1        CPU trainer without MPI (single process only)
#   NO_MULTI_GPU=1  CUDA trainer without MPI and NCCL (single GPU only)
#   CUDA_ARCHS="90a 80"   GPU architectures to compile for (default: Hopper and Ampere)
#   NCCL_HOME=dir   where include/nccl.h and lib/libnccl.so live, if not in the CUDA toolkit
#   PYTHON=...      Python with torch for the reference fixtures (default /usr/bin/python3)

CC ?= cc
PYTHON ?= /usr/bin/python3
CFLAGS ?= -O3 -march=native
CFLAGS += -std=gnu11 -Wall -Wno-unused-function -Wno-unknown-pragmas -D_GNU_SOURCE
LDLIBS_CPU = -lm

# quiet probes: a tiny program is compiled with the candidate flags; "1" if it builds
probe = $(shell printf '$(1)' | $(CC) -x c - $(2) -o /dev/null >/dev/null 2>&1 && echo 1)
OMP_PROG := \#include <omp.h>\nint main(void){return omp_get_max_threads();}
BLAS_PROG := \#include <cblas.h>\nint main(void){cblas_sgemm(CblasRowMajor,CblasNoTrans,CblasNoTrans,0,0,0,0,0,0,0,0,0,0,0);return 0;}

# ---------------------------------------------------------------------------------------------
# optional features, each reported on one line

ifeq ($(NO_OMP),1)
  $(info OpenMP:   off (NO_OMP=1))
else ifeq ($(call probe,$(OMP_PROG),-fopenmp),1)
  CFLAGS += -fopenmp
  $(info OpenMP:   found)
else
  $(info OpenMP:   not found, CPU code runs on one thread)
endif

ifeq ($(NO_BLAS),1)
  CPU_BLAS :=
  $(info OpenBLAS: off (NO_BLAS=1), using the built-in matmul)
else ifeq ($(call probe,$(BLAS_PROG),-lopenblas),1)
  CPU_BLAS := -DUSE_BLAS
  LDLIBS_CPU += -lopenblas
  $(info OpenBLAS: found)
else
  CPU_BLAS :=
  $(info OpenBLAS: not found (apt-get install libopenblas-dev), using the built-in matmul)
endif

MPICC := $(shell command -v mpicc 2>/dev/null)
ifeq ($(NO_MPI),1)
  $(info MPI:      off for the CPU trainer (NO_MPI=1))
  MPI_CFLAGS :=
  MPI_LDLIBS :=
else ifneq ($(MPICC),)
  MPI_CFLAGS := -DUSE_MPI $(shell mpicc --showme:compile 2>/dev/null)
  MPI_LDLIBS := $(shell mpicc --showme:link 2>/dev/null)
  $(info MPI:      found ($(MPICC)))
else
  MPI_CFLAGS :=
  MPI_LDLIBS :=
  $(info MPI:      not found (apt-get install openmpi-bin libopenmpi-dev), single-process only)
endif

PCRE2_OK := $(shell pkg-config --exists libpcre2-8 2>/dev/null && echo 1)
ifeq ($(PCRE2_OK),1)
  PCRE2_CFLAGS := $(shell pkg-config --cflags libpcre2-8)
  PCRE2_LDLIBS := $(shell pkg-config --libs libpcre2-8)
  $(info PCRE2:    found)
else
  $(info PCRE2:    not found (apt-get install libpcre2-dev); gpt2_tokenize is not built)
endif

# ---------------------------------------------------------------------------------------------
# CPU targets

CPU_HEADERS = $(wildcard llmc/*.h)
TARGETS = train_gpt2 test_gpt2 test_gpt2_noblas

train_gpt2: train_gpt2.c $(CPU_HEADERS)
	$(CC) $(CFLAGS) $(CPU_BLAS) $(MPI_CFLAGS) $< -o $@ $(LDLIBS_CPU) $(MPI_LDLIBS)

test_gpt2: test_gpt2.c train_gpt2.c $(CPU_HEADERS)
	$(CC) $(CFLAGS) $(CPU_BLAS) $(MPI_CFLAGS) $< -o $@ $(LDLIBS_CPU) $(MPI_LDLIBS)

# the same test against the dependency-free matmul, so the two builds are held to the same numbers
test_gpt2_noblas: test_gpt2.c train_gpt2.c $(CPU_HEADERS)
	$(CC) $(CFLAGS) $< -o $@ -lm

# ---- tokenizer and data tools (issue: tokenizer) ----
# ---- end tokenizer and data tools ----

# ---- export tools (issue: robust runs) ----
# ---- end export tools ----

# ---------------------------------------------------------------------------------------------
# CUDA targets

NVCC := $(shell command -v nvcc 2>/dev/null || (test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc))
CUDA_ARCHS ?= 90a 80
# ---- CUDA trainer (issue: CUDA trainer) ----
# ---- end CUDA trainer ----

# ---------------------------------------------------------------------------------------------
# tests (README "Testing"); each test-* target is one script or binary, failing loudly

FIXTURES = dev/test/fixtures
TEST_TARGETS = test-model test-loader test-bad-input

.PHONY: all test clean fixtures $(TEST_TARGETS)

all: $(TARGETS)
test: $(TEST_TARGETS)
	@echo "make test: all tests passed"

fixtures: $(FIXTURES)/tiny.bin $(FIXTURES)/d12.bin

# tiny model (fast, many checks) and GPT-2 124M (the real shapes); both from the PyTorch reference
$(FIXTURES)/tiny.bin: train_gpt2.py
	@mkdir -p $(FIXTURES)
	$(PYTHON) train_gpt2.py --model L2:C64:H4:T128 --seed 1 --write-model $@ \
	  --batch 4 --seq 32 --debug-state $(FIXTURES)/tiny_state.bin --trajectory $(FIXTURES)/tiny_traj.txt --steps 10

$(FIXTURES)/d12.bin: train_gpt2.py
	@mkdir -p $(FIXTURES)
	$(PYTHON) train_gpt2.py --model d12 --seed 2 --write-model $@ \
	  --batch 4 --seq 64 --debug-state $(FIXTURES)/d12_state.bin --trajectory $(FIXTURES)/d12_traj.txt --steps 10

test-model: test_gpt2 test_gpt2_noblas fixtures
	./test_gpt2 $(FIXTURES)/tiny.bin $(FIXTURES)/tiny_state.bin $(FIXTURES)/tiny_traj.txt
	./test_gpt2 $(FIXTURES)/d12.bin $(FIXTURES)/d12_state.bin $(FIXTURES)/d12_traj.txt
	./test_gpt2_noblas $(FIXTURES)/tiny.bin $(FIXTURES)/tiny_state.bin $(FIXTURES)/tiny_traj.txt

test-loader: dev/test/test_dataloader
	./dev/test/test_dataloader

dev/test/test_dataloader: dev/test/test_dataloader.c $(CPU_HEADERS)
	$(CC) $(CFLAGS) $< -o $@ -lm

test-bad-input: train_gpt2
	bash dev/test/test_bad_input.sh

clean:
	rm -f $(TARGETS) train_gpt2cu test_gpt2cu gpt2_tokenize export_hf dev/test/test_dataloader
	rm -rf $(FIXTURES) build
