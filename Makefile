# GPT-2 trainers in C and CUDA.
#
#   make              build everything this machine can build (CUDA targets only if nvcc is found)
#   make test         the test suite; needs no GPU (README: "Testing"; targets in dev/test/tests.mk)
#   make test_gpt2cu  the GPU test binary (run it on a machine with a GPU)
#   make cuda-libs    where cuDNN, NVRTC, NCCL and the cuDNN frontend were found (build_llmc.sh, prebuilt.sh)
#
# Options (make VAR=1):
#   NO_BLAS=1       CPU matmuls without OpenBLAS (dependency-free, slower)
#   NO_OMP=1        no OpenMP
#   NO_MPI=1        CPU trainer without MPI (single process only)
#   NO_MULTI_GPU=1  CUDA trainer without MPI and NCCL (single GPU only)
#   CUDA_ARCHS="90a 80"   GPU architectures to compile for (default: Hopper and Ampere)
#   NCCL_HOME=dir   where include/nccl.h and lib/libnccl.so[.2] live (default: the CUDA toolkit, the
#                   system, or the nvidia-nccl-cu13 wheel in the site-packages of $(PYTHON) or python3)
#   CUDNN_HOME=dir  the same for include/cudnn.h and lib/libcudnn.so[.9] (wheel: nvidia-cudnn-cu13)
#   CUDNN_FRONTEND=dir   the cuDNN frontend headers (default: cudnn-frontend/include, which
#                   `make cudnn-frontend` fetches from PyPI); with cuDNN they add -at cudnn
#   NO_CUDNN=1      CUDA trainer without cuDNN (attention is our own kernel only)
#   PYTHON=...      Python with torch for the reference fixtures (default /usr/bin/python3)

.DEFAULT_GOAL := all
CC ?= cc
PYTHON ?= /usr/bin/python3
CFLAGS ?= -O3 -march=native
# -ffast-math lets GCC vectorize reductions and call glibc's vector tanhf/expf (about 1.3x on the
# CPU trainer); -fno-finite-math-only keeps isnan/isinf working for the numeric guards. These (and
# -fopenmp below) are added to any CFLAGS, also one given as `make CFLAGS=...` (hence override),
# which replaces only the optimization and target flags
CFLAGS_COMMON := -ffast-math -fno-finite-math-only \
                 -std=gnu11 -Wall -Wno-unused-function -Wno-unknown-pragmas -Wno-format-truncation -D_GNU_SOURCE
override CFLAGS += $(CFLAGS_COMMON)
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
  override CFLAGS += -fopenmp
  $(info OpenMP:   found)
else
  $(info OpenMP:   not found, CPU code runs on one thread)
endif

# OpenBLAS: prefer Debian's OpenMP build, whose threads are the trainer's OpenMP threads; the
# default pthreads build spins its own threads against OpenMP's and runs about 2x slower
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
OPENBLAS_OMP_INC := /usr/include/$(MULTIARCH)/openblas-openmp
OPENBLAS_OMP_LIB := /usr/lib/$(MULTIARCH)/openblas-openmp
ifeq ($(NO_BLAS),1)
  CPU_BLAS :=
  $(info OpenBLAS: off (NO_BLAS=1), using the built-in matmul)
else ifeq ($(findstring -fopenmp,$(CFLAGS))$(call probe,$(BLAS_PROG),-I$(OPENBLAS_OMP_INC) -L$(OPENBLAS_OMP_LIB) -lopenblas -fopenmp),-fopenmp1)
  CPU_BLAS := -DUSE_BLAS -I$(OPENBLAS_OMP_INC)
  LDLIBS_CPU += -L$(OPENBLAS_OMP_LIB) -Wl,-rpath,$(OPENBLAS_OMP_LIB) -lopenblas
  $(info OpenBLAS: found (OpenMP build))
else ifeq ($(call probe,$(BLAS_PROG),-lopenblas),1)
  CPU_BLAS := -DUSE_BLAS
  LDLIBS_CPU += -lopenblas
  $(info OpenBLAS: found (pthreads build; apt-get install libopenblas-openmp-dev for the faster OpenMP build))
else
  CPU_BLAS :=
  $(info OpenBLAS: not found (apt-get install libopenblas-openmp-dev), using the built-in matmul)
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
  # the trainers' --prompt encodes with the GPT-2 encoder (llmc/bpe.h), which needs PCRE2
  GEN_FLAGS := -DUSE_PCRE2 $(PCRE2_CFLAGS)
  GEN_LDLIBS := $(PCRE2_LDLIBS)
  $(info PCRE2:    found)
else
  $(info PCRE2:    not found (apt-get install libpcre2-dev); gpt2_tokenize is not built, the trainers have no --prompt)
endif

# ---------------------------------------------------------------------------------------------
# CUDA: compiler, architectures, NCCL, MPI (each reported on one line)

NVCC := $(shell command -v nvcc 2>/dev/null || (test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc))
# CUDA 12 or 13 (sm_90a; README): an older nvcc counts as none, and the line below says which it was
NVCC_MISSING := not found (install the CUDA toolkit 12 or 13, or put its nvcc on PATH)
ifneq ($(NVCC),)
  NVCC_VERSION := $(shell $(NVCC) --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
  ifeq ($(shell v='$(NVCC_VERSION)'; [ -n "$$v" ] && [ "$${v%%.*}" -lt 12 ] 2>/dev/null && echo old),old)
    NVCC_MISSING := $(NVCC) is CUDA $(NVCC_VERSION), and the CUDA trainer needs 12 or 13 (put a newer nvcc on PATH, or NVCC=<its path>)
    override NVCC :=
  endif
endif
CUDA_ARCHS ?= 90a 80
# Architectures: the bf16 kernels need sm_80 or newer; 90a is Hopper with its arch-specific
# instructions (the H200 target). Every value becomes -gencode arch=compute_X,code=sm_X.
CUDA_ARCHS_KNOWN := 80 86 87 89 90 90a 100 100a 103 103a 120 120a 121 121a
ifeq ($(strip $(CUDA_ARCHS)),)
  $(error CUDA_ARCHS is empty; give at least one architecture, e.g. CUDA_ARCHS="90a 80")
endif
ifneq ($(filter-out $(CUDA_ARCHS_KNOWN),$(CUDA_ARCHS)),)
  $(error CUDA_ARCHS="$(CUDA_ARCHS)": unknown architecture(s) "$(filter-out $(CUDA_ARCHS_KNOWN),$(CUDA_ARCHS))"; use values from "$(CUDA_ARCHS_KNOWN)" (bf16 kernels need sm_80 or newer), e.g. CUDA_ARCHS="90a 80")
endif
CUDA_GENCODE := $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a))
# the base flags build a single-GPU trainer; NCCL and MPI add to NVCC_FLAGS/NVCC_LDLIBS below.
# LLMC_CUDA_ARCHS names the architectures in the trainer's "no kernel image for this GPU" message.
# OpenMP (where found) runs the host's random init on all cores (llmc/model_io.h).
NVCC_COMMON_FLAGS := -O3 --use_fast_math -std=c++17 -Xcompiler -Wall,-Wno-unused-function,-Wno-format-truncation \
                     $(if $(findstring -fopenmp,$(CFLAGS)),-Xcompiler -fopenmp)
NVCC_BASE_FLAGS := $(NVCC_COMMON_FLAGS) $(CUDA_GENCODE) -DLLMC_CUDA_ARCHS='"$(strip $(CUDA_ARCHS))"'
CUDA_HOME ?= $(if $(NVCC),$(patsubst %/bin/nvcc,%,$(NVCC)),/usr/local/cuda)
# rpath: the toolkit's cuBLAS is found at run time even where its folder is not on the loader's path
NVCC_BASE_LDLIBS := -lcublas -lcublasLt -Xlinker -rpath -Xlinker $(CUDA_HOME)/lib64
NVCC_FLAGS := $(NVCC_BASE_FLAGS)
NVCC_LDLIBS := $(NVCC_BASE_LDLIBS)
# cuDNN attention (llmc/cuda/cudnn_att.cpp, -at cudnn): its own object, so that the slow-to-compile frontend
# headers stay out of every other file; the frontend headers go to CUDNN_FRONTEND_DIR/include
CUDNN_OBJ := build/cudnn_att.o
CUDNN_FRONTEND_DIR := cudnn-frontend
CUDNN_FRONTEND_VERSION ?= 1.32.0

ifeq ($(NVCC),)
  $(info nvcc:     $(NVCC_MISSING); CUDA targets are not built)
else
  $(info nvcc:     found ($(NVCC), CUDA $(NVCC_VERSION); CUDA_ARCHS="$(CUDA_ARCHS)"))
  # cuDNN and NCCL: from CUDNN_HOME / NCCL_HOME if given, else the CUDA toolkit, the system, or
  # PyTorch's pip wheels (nvidia-cudnn-cu13, nvidia-nccl-cu13: nvidia/cudnn, nvidia/nccl in the
  # site-packages of $(PYTHON) or python3). The wheels hold only versioned libraries (libcudnn.so.9,
  # libnccl.so.2), so every library is linked by its file name (-l:file) with an rpath to its folder.
  PY_NVIDIA := $(shell for p in $(PYTHON) python3; do $$p -c 'import site; print(*(d + "/nvidia" for d in site.getsitepackages()))' 2>/dev/null; done)
  # find_dev <header> <library> <folders>: "folder libdir file" of the first folder with include/<header>
  # and <library>.so or <library>.so.N in lib64/, lib/ or lib/<multiarch>/
  find_dev = $(shell for d in $(3); do [ -f $$d/include/$(1) ] || continue; for l in lib64 lib lib/$(MULTIARCH); do \
               f=$$(cd $$d/$$l 2>/dev/null && ls $(2).so $(2).so.[0-9]* 2>/dev/null | head -1); \
               if [ -n "$$f" ]; then echo $$d $$d/$$l $$f; exit 0; fi; done; done)
  # check_home <VAR> <find_dev result> <header> <library>: a VAR=dir given without the library stops make
  check_home = $(if $($(1)),$(if $(2),,$(error $(1)=$($(1)): no include/$(3) with $(4).so or $(4).so.N in lib64/ or lib/ there; give the folder that holds both)))
  link_dev = -L$(abspath $(word 2,$(1))) -Xlinker -rpath -Xlinker $(abspath $(word 2,$(1))) -l:$(word 3,$(1))
  # "9.19.0" from the #defines <prefix>(MAJOR|MINOR|<patch>)<suffix> of a version header
  header_version = $(shell sed -n 's/^\#define $(1)\(MAJOR\|MINOR\|$(2)\)$(3) *\([0-9]*\).*/\2/p' $(4) 2>/dev/null | paste -sd.)

  CUDNN := $(call find_dev,cudnn.h,libcudnn,$(if $(CUDNN_HOME),$(CUDNN_HOME),$(CUDA_HOME) /usr $(addsuffix /cudnn,$(PY_NVIDIA))))
  $(call check_home,CUDNN_HOME,$(CUDNN),cudnn.h,libcudnn)
  # the cuDNN frontend's headers (make cudnn-frontend fetches them), at CUDNN_FRONTEND=dir or its include/
  CUDNN_FRONTEND_INC := $(firstword $(foreach d,$(if $(CUDNN_FRONTEND),$(CUDNN_FRONTEND) $(CUDNN_FRONTEND)/include,$(CUDNN_FRONTEND_DIR)/include),$(if $(wildcard $(d)/cudnn_frontend.h),$(d))))
  ifneq ($(CUDNN_FRONTEND),)
    ifeq ($(CUDNN_FRONTEND_INC),)
      $(error CUDNN_FRONTEND=$(CUDNN_FRONTEND): no cudnn_frontend.h there or in its include/; make cudnn-frontend fetches the headers)
    endif
  endif
  # NVRTC: the frontend calls it, and cuDNN's run-time compiled engines load it (linking it here loads
  # the toolkit's copy at start, so their dlopen finds it whatever the library path)
  NVRTC := $(call find_dev,nvrtc.h,libnvrtc,$(CUDA_HOME) $(addsuffix /cu13,$(PY_NVIDIA)) $(addsuffix /cuda_nvrtc,$(PY_NVIDIA)))
  ifeq ($(NO_CUDNN),1)
    $(info cuDNN:    off (NO_CUDNN=1); attention is our own kernel only)
  else ifeq ($(CUDNN),)
    $(info cuDNN:    not found (CUDNN_HOME=dir, or pip install nvidia-cudnn-cu13); attention is our own kernel only)
  else ifeq ($(CUDNN_FRONTEND_INC),)
    $(info cuDNN:    found ($(firstword $(CUDNN))), not used: no cuDNN frontend headers (make cudnn-frontend, or CUDNN_FRONTEND=dir); attention is our own kernel only)
  else ifeq ($(NVRTC),)
    $(info cuDNN:    found ($(firstword $(CUDNN))), not used: no NVRTC (include/nvrtc.h, libnvrtc.so) in $(CUDA_HOME); attention is our own kernel only)
  else
    USE_CUDNN := 1
    CUDNN_LDLIBS := $(CUDNN_OBJ) $(call link_dev,$(CUDNN)) $(call link_dev,$(NVRTC))
    NVCC_FLAGS += -DUSE_CUDNN
    NVCC_LDLIBS += $(CUDNN_LDLIBS)
    $(info cuDNN:    used for attention (-at cudnn; cuDNN $(call header_version,CUDNN_,PATCHLEVEL,,$(firstword $(CUDNN))/include/cudnn_version.h) in $(firstword $(CUDNN)), frontend $(call header_version,CUDNN_FRONTEND_,PATCH,_VERSION,$(CUDNN_FRONTEND_INC)/cudnn_frontend_version.h) in $(CUDNN_FRONTEND_INC)))
  endif
  NCCL := $(call find_dev,nccl.h,libnccl,$(if $(NCCL_HOME),$(NCCL_HOME),$(CUDA_HOME) /usr $(addsuffix /nccl,$(PY_NVIDIA))))
  $(call check_home,NCCL_HOME,$(NCCL),nccl.h,libnccl)
  # MPI for the CUDA trainer (ranks from mpirun, the host-staged -pb mpi backend): from mpicc, or
  # MPI_INCDIRS / MPI_LIBDIRS (directory lists) for an MPI without a working mpicc
  MPI_INCDIRS ?= $(if $(MPICC),$(shell mpicc --showme:incdirs 2>/dev/null))
  MPI_LIBDIRS ?= $(if $(MPICC),$(shell mpicc --showme:libdirs 2>/dev/null))
  ifeq ($(NO_MULTI_GPU),1)
    $(info NCCL:     off (NO_MULTI_GPU=1), the CUDA trainer is single-GPU)
    $(info MPI/CUDA: off (NO_MULTI_GPU=1))
  else
    ifeq ($(NCCL),)
      $(info NCCL:     not found (NCCL_HOME=dir, or pip install nvidia-nccl-cu13); no -pb nccl)
    else
      NVCC_FLAGS += -DMULTI_GPU -I$(firstword $(NCCL))/include
      NVCC_LDLIBS += $(call link_dev,$(NCCL))
      $(info NCCL:     found ($(firstword $(NCCL))/include/nccl.h, $(word 2,$(NCCL))/$(word 3,$(NCCL))), multi-GPU build (-DMULTI_GPU))
    endif
    ifneq ($(strip $(MPI_LIBDIRS)),)
      NVCC_FLAGS += -DUSE_MPI -DOMPI_SKIP_MPICXX=1 $(addprefix -I,$(MPI_INCDIRS))
      NVCC_LDLIBS += $(foreach d,$(MPI_LIBDIRS),-L$(d) -Xlinker -rpath -Xlinker $(d)) -lmpi
      $(info MPI/CUDA: found ($(if $(filter file,$(origin MPI_LIBDIRS)),$(MPICC),MPI_LIBDIRS=$(MPI_LIBDIRS))), ranks can be launched by mpirun, -pb mpi (-DUSE_MPI))
    else
      $(info MPI/CUDA: not found (apt-get install openmpi-bin libopenmpi-dev); ranks come from torchrun/SLURM variables)
    endif
  endif
endif

# ---------------------------------------------------------------------------------------------
# Feature stamps: build/features/<feature> holds what the probes above found for that feature (the
# flags it adds, or nothing). A stamp is rewritten only when that changes, and each binary depends
# on the stamps of the features it is built with, so a plain make rebuilds exactly those binaries
# when a feature appears or goes (MPI installed after the first build, NO_MPI=1, ...). The stamps
# are written while the Makefile is read, so make -n and make -q see a change too. Each make writes
# its probes' answer to a file of its own (.new.<pid>) and compares that: makes started together
# (make test's lanes) would otherwise truncate one another's answer, see a change and rewrite the
# stamp, and binaries would go stale under the tests.
FEATURE_DIR := build/features
feature_stamp = $(shell mkdir -p $(FEATURE_DIR) && f=$(FEATURE_DIR)/$(1) && n=$$f.new.$$$$ && printf '%s\n' '$(strip $(subst ',,$(2)))' > $$n && \
                  { cmp -s $$n $$f && rm -f $$n || mv -f $$n $$f; } && echo $$f)
STAMP_OPENMP := $(call feature_stamp,openmp,$(filter -fopenmp,$(CFLAGS)))
STAMP_OPENBLAS := $(call feature_stamp,openblas,$(CPU_BLAS) $(LDLIBS_CPU))
STAMP_MPI := $(call feature_stamp,mpi,$(MPI_CFLAGS) $(MPI_LDLIBS) | CUDA: $(if $(filter -DUSE_MPI,$(NVCC_FLAGS)),$(MPI_INCDIRS) $(MPI_LIBDIRS)))
STAMP_PCRE2 := $(call feature_stamp,pcre2,$(GEN_FLAGS) $(GEN_LDLIBS))
STAMP_NVCC := $(call feature_stamp,nvcc,$(NVCC) $(NVCC_VERSION))
STAMP_NCCL := $(call feature_stamp,nccl,$(if $(filter -DMULTI_GPU,$(NVCC_FLAGS)),$(NCCL)))
STAMP_CUDNN := $(call feature_stamp,cudnn,$(if $(USE_CUDNN),$(CUDNN) $(NVRTC) $(CUDNN_FRONTEND_INC)))
CPU_STAMPS := $(STAMP_OPENMP) $(STAMP_OPENBLAS) $(STAMP_MPI)
CUDA_STAMPS := $(STAMP_NVCC) $(STAMP_NCCL) $(STAMP_CUDNN) $(STAMP_MPI)

# ---------------------------------------------------------------------------------------------
# the products: trainers, tools, model tests

CPU_HEADERS = $(wildcard llmc/*.h)
CUDA_HEADERS = $(wildcard llmc/*.h llmc/cuda/*.h llmc/cuda/*.cuh)
TARGETS = train_gpt2 test_gpt2 export_hf

train_gpt2: train_gpt2.c $(CPU_HEADERS) $(CPU_STAMPS) $(STAMP_PCRE2)
	$(CC) $(CFLAGS) $(CPU_BLAS) $(MPI_CFLAGS) $(GEN_FLAGS) $< -o $@ $(LDLIBS_CPU) $(MPI_LDLIBS) $(GEN_LDLIBS)

test_gpt2: test_gpt2.c train_gpt2.c $(CPU_HEADERS) dev/test/model_test.h $(CPU_STAMPS)
	$(CC) $(CFLAGS) $(CPU_BLAS) $(MPI_CFLAGS) $< -o $@ $(LDLIBS_CPU) $(MPI_LDLIBS)

# gpt2_tokenize: GPT-2 BPE encoder/decoder and dataset preparer (dev/data/README.md); needs PCRE2
ifeq ($(PCRE2_OK),1)
TARGETS += gpt2_tokenize
gpt2_tokenize: dev/data/gpt2_tokenize.c llmc/bpe.h llmc/tokenizer.h llmc/utils.h $(STAMP_OPENMP) $(STAMP_PCRE2)
	$(CC) $(CFLAGS) $(PCRE2_CFLAGS) $< -o $@ $(PCRE2_LDLIBS)
else
gpt2_tokenize:
	@echo "gpt2_tokenize needs PCRE2 (libpcre2-8): apt-get install libpcre2-dev"; exit 1
endif

# export_hf: model .bin <-> Hugging Face GPT2LMHeadModel folder (dev/eval/README.md); plain C
export_hf: dev/eval/export_hf.c $(CPU_HEADERS) $(STAMP_OPENMP)
	$(CC) $(CFLAGS) $< -o $@ -lm

ifneq ($(NVCC),)
TARGETS += train_gpt2cu test_gpt2cu
CUDNN_DEP := $(if $(USE_CUDNN),$(CUDNN_OBJ))
train_gpt2cu: train_gpt2.cu $(CUDA_HEADERS) $(CUDNN_DEP) $(CUDA_STAMPS) $(STAMP_PCRE2)
	$(NVCC) $(NVCC_FLAGS) $(GEN_FLAGS) $< -o $@ $(NVCC_LDLIBS) $(GEN_LDLIBS)

test_gpt2cu: test_gpt2.cu train_gpt2.cu $(CUDA_HEADERS) dev/test/model_test.h $(CUDNN_DEP) $(CUDA_STAMPS)
	$(NVCC) $(NVCC_FLAGS) $< -o $@ $(NVCC_LDLIBS)

# the minimal variant (single GPU, no cuDNN: what NO_MULTI_GPU=1 NO_CUDNN=1 builds), compiled by the
# tests so that neither configuration's #ifdefs can rot
build/cuda_single/train_gpt2cu: train_gpt2.cu $(CUDA_HEADERS) $(STAMP_NVCC) $(STAMP_PCRE2)
	@mkdir -p $(@D)
	$(NVCC) $(NVCC_BASE_FLAGS) $(GEN_FLAGS) $< -o $@ $(NVCC_BASE_LDLIBS) $(GEN_LDLIBS)

# the one-GPU trainer with cuDNN's attention where the build has it (what NO_MULTI_GPU=1 builds):
# it loads neither NCCL nor MPI, so the one-GPU runs of dev/bench/repro_books.sh take it prebuilt
# (dev/gpu/prebuilt.sh) without the carried OpenMPI
build/single_gpu/train_gpt2cu: train_gpt2.cu $(CUDA_HEADERS) $(CUDNN_DEP) $(STAMP_NVCC) $(STAMP_CUDNN) $(STAMP_PCRE2)
	@mkdir -p $(@D)
	$(NVCC) $(NVCC_BASE_FLAGS) $(if $(USE_CUDNN),-DUSE_CUDNN) $(GEN_FLAGS) $< -o $@ $(NVCC_BASE_LDLIBS) $(CUDNN_LDLIBS) $(GEN_LDLIBS)

# a single-GPU trainer for one architecture only, with the main build's flags and rpath:
# dev/test/test_gpu.sh's bad_arch check runs build/arch_80/train_gpt2cu on a Hopper GPU
build/arch_%/train_gpt2cu: train_gpt2.cu $(CUDA_HEADERS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCC_COMMON_FLAGS) -gencode arch=compute_$*,code=sm_$* -DLLMC_CUDA_ARCHS='"$*"' $< -o $@ $(NVCC_BASE_LDLIBS)

# a test build that leaves out the event waits LLMC_TEST_DROP_WAIT names (llmc/cuda/grad_reduce.cuh): what the
# stream-order debug mode must catch (dev/test/test_gpu.sh's multi part)
build/drop_wait/train_gpt2cu: train_gpt2.cu $(CUDA_HEADERS)
	@mkdir -p $(@D)
	$(NVCC) $(filter-out -DUSE_CUDNN,$(NVCC_FLAGS)) -DLLMC_TEST_DROP_WAIT $< -o $@ $(filter-out $(CUDNN_OBJ),$(NVCC_LDLIBS))

# per-layer backward time and a 1-rank NCCL all-reduce of a layer's gradients (dev/bench/bench_gpu.sh)
build/bench_layers: dev/bench/bench_layers.cu train_gpt2.cu $(CUDA_HEADERS) $(CUDNN_DEP) $(CUDA_STAMPS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCC_FLAGS) -I. $< -o $@ $(NVCC_LDLIBS)

# host code only, about 70 s of CPU (the frontend is a large header library; its JSON serialization,
# which nothing here uses, is left out: about 110 s with it)
$(CUDNN_OBJ): llmc/cuda/cudnn_att.cpp llmc/cuda/cudnn_att.h $(STAMP_NVCC) $(STAMP_CUDNN)
	@mkdir -p $(@D)
	$(NVCC) -O2 -std=c++17 -Xcompiler -Wall -DCUDNN_FRONTEND_SKIP_JSON_LIB -isystem $(CUDNN_FRONTEND_INC) -I$(firstword $(CUDNN))/include -c $< -o $@
else
train_gpt2cu test_gpt2cu build/cuda_single/train_gpt2cu build/single_gpu/train_gpt2cu build/bench_layers build/drop_wait/train_gpt2cu $(CUDNN_OBJ):
	@echo "$@ needs nvcc (the CUDA toolkit 12 or 13): $(NVCC_MISSING)" >&2; exit 1
endif

# where the libraries found above are, for other builds (dev/bench/build_llmc.sh builds llm.c
# with the same cuDNN) and for prebuilt binaries (dev/gpu/prebuilt.sh): one "name=folder libdir
# file" line each, "name=" when not found
.PHONY: cuda-libs
cuda-libs:
	@echo "cuda-libs cudnn=$(CUDNN)"
	@echo "cuda-libs nvrtc=$(NVRTC)"
	@echo "cuda-libs nccl=$(NCCL)"
	@echo "cuda-libs frontend=$(abspath $(CUDNN_FRONTEND_INC))"

# the cuDNN frontend's headers, from PyPI's nvidia-cudnn-frontend wheel (include/ only: the wheel's
# Python module is not used); git-ignored. Needs network once; carry the folder to offline machines.
.PHONY: cudnn-frontend
cudnn-frontend: $(CUDNN_FRONTEND_DIR)/include/cudnn_frontend.h
$(CUDNN_FRONTEND_DIR)/include/cudnn_frontend.h:
	rm -rf build/cudnn-frontend-wheel $(CUDNN_FRONTEND_DIR) && mkdir -p build/cudnn-frontend-wheel
	$(PYTHON) -m pip download -q --no-deps --only-binary=:all: -d build/cudnn-frontend-wheel \
	    nvidia-cudnn-frontend==$(CUDNN_FRONTEND_VERSION)
	$(PYTHON) -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); \
	    z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("include/")])' \
	    build/cudnn-frontend-wheel/nvidia_cudnn_frontend-*.whl $(CUDNN_FRONTEND_DIR)
	@test -f $@ && echo "cudnn-frontend: headers of nvidia-cudnn-frontend $(CUDNN_FRONTEND_VERSION) in $(CUDNN_FRONTEND_DIR)/include"

.PHONY: all clean
all: $(TARGETS)

clean:
	rm -f train_gpt2 test_gpt2 test_gpt2_noblas train_gpt2cu test_gpt2cu gpt2_tokenize export_hf
	rm -f dev/test/test_dataloader dev/test/test_bootstrap dev/test/test_init dev/test/crc_probe dev/test/sample_probe dev/test/newton_schulz dev/test/test_cpu_matmul dev/test/test_cpu_matmul_* dev/test/test_flight_note
	rm -rf dev/test/fixtures build

# the tests, the GPU test entry points and the benchmarks
include dev/test/tests.mk
