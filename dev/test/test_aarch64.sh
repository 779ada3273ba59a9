#!/usr/bin/env bash
# ARM64 (aarch64: the Grace CPU of a GH200, Graviton, Ampere), without ARM hardware (make
# test-aarch64): the programs of `make aarch64-programs` (dev/test/tests.mk: Debian's aarch64 gcc,
# -march=armv8.2-a, -Werror) run under qemu-aarch64, one thread each (this qemu hangs in glibc's
# pthread_create, so no OpenMP team and no background checkpoint writer; under emulation a
# step's time means nothing either). What must hold on ARM as on x86-64:
#  - the CPU trainer's model test against the PyTorch fixture (tiny_v512, the tiny model with a
#    512-token vocabulary, as emulation makes GPT-2's LM head slow: losses, gradients, 10 AdamW
#    steps within 1e-7 relative; a checkpoint resumed bit for bit); the built-in matmul at NEON's
#    4-float vectors (ARM builds without OpenBLAS use it);
#  - the CRC-32 of every file, by ARMv8's CRC32 instructions, against Python's zlib.crc32;
#  - ./train_gpt2 built for ARM (flags, data loader, checkpoints, main.log): the losses of the
#    x86-64 build of the same run to rounding (another vector width, another summation order), and
#    a run resumed from its step-3 checkpoint equal to the uninterrupted one bit for bit;
#  - the CUDA trainer's host code built for ARM (a GH200's host) as the simulator's trainer: its
#    losses those of the CPU trainer within bf16's rounding.
#   bash dev/test/test_aarch64.sh        (from the repo root; make test-aarch64 builds the fixtures)
source "$(dirname "$0")/lib.sh" test_aarch64
CC_ARM=${AARCH64_CC:-aarch64-linux-gnu-gcc}
SYSROOT=/usr/aarch64-linux-gnu
HINT="apt-get install gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user (or bash scripts/test.sh)"
for tool in "$CC_ARM" "${AARCH64_CXX:-aarch64-linux-gnu-g++}" qemu-aarch64; do
    command -v "$tool" > /dev/null || { skip_or_fail test_aarch64 "$tool" "$HINT"; exit; }
done
[ -e "$SYSROOT/lib/ld-linux-aarch64.so.1" ] || { skip_or_fail test_aarch64 "$SYSROOT (aarch64 glibc)" "$HINT"; exit; }
make -C "$ROOT" --no-print-directory aarch64-programs > build.log 2>&1 || { bad "make aarch64-programs failed"; tail -15 build.log; finish; }
ok "built for aarch64 with -Werror: train_gpt2, test_gpt2, crc_probe; train_gpt2cu's host code (the simulator's trainer)"
ARM=$ROOT/build/aarch64
arm() { QEMU_LD_PREFIX=$SYSROOT OMP_NUM_THREADS=1 qemu-aarch64 "$@"; }
readelf -h "$ARM/train_gpt2" | grep -q 'Machine: *AArch64' || bad "build/aarch64/train_gpt2 is not an aarch64 binary: $(readelf -h "$ARM/train_gpt2" | grep Machine)"

# ---- the model test against PyTorch, and a checkpoint resumed bit for bit
F=$ROOT/dev/test/fixtures
arm "$ARM/test_gpt2" "$F/tiny_v512.bin" "$F/tiny_v512_state.bin" "$F/tiny_v512_traj.txt" > model.out 2>&1 && grep -q "all checks passed" model.out \
    && grep -q "built-in matmul, 4-float vectors" model.out \
    && ok "test_gpt2 on aarch64 (built-in matmul, 4-float vectors): the PyTorch fixture's losses, gradients and 10 steps; $(grep -m1 '^checkpoint:' model.out)" \
    || { bad "test_gpt2 on aarch64"; grep -v ' ok$' model.out | tail -8; }

# ---- the CRC-32 by ARMv8's instructions, against zlib's
arm "$ARM/crc_probe" crc.bin > crc.txt && crc_against_zlib crc.bin crc.txt && ok "CRC-32 (ARMv8 CRC32 instructions): $(wc -l < crc.txt) slices agree with zlib.crc32" || bad "CRC-32 on aarch64 differs from zlib.crc32"

# ---- the trainer: x86-64's losses to rounding; a resume bit for bit
$PY "$ROOT/dev/bench/make_random_shard.py" train.bin 20000 1 512 > /dev/null
$PY "$ROOT/dev/bench/make_random_shard.py" val.bin 4000 2 512 > /dev/null
ARGS=(-i train.bin -j val.bin -e L1:C128:H2:V512 -b 2 -t 32 -d 128 -v 3 -m 2 -s 0 -x 6 -tk none.bin --ckpt-async 0)
LLMC_CPU_MATMUL=builtin OMP_NUM_THREADS=1 "$TRAINER" "${ARGS[@]}" -o x86 > x86.out 2>&1 || { bad "the x86-64 run failed"; tail -3 x86.out; }
arm "$ARM/train_gpt2" "${ARGS[@]}" -o full > full.out 2>&1 || { bad "the aarch64 run failed"; tail -3 full.out; }
compare_logs full/main.log x86/main.log trl=1e-5 tel=1e-5 norm=1e-4 > cmp.out \
    && ok "./train_gpt2 on aarch64: the x86-64 build's losses over 6 steps (2 micro-steps each) and 2 validations ($(head -1 cmp.out | sed 's/^ *//'))" \
    || { bad "aarch64 and x86-64 runs differ"; cat cmp.out; }
arm "$ARM/train_gpt2" "${ARGS[@]}" -x 3 -n 3 -o part > part1.out 2>&1 && arm "$ARM/train_gpt2" "${ARGS[@]}" -n 3 -y 1 -o part > part2.out 2>&1 \
    && grep -q "resum" part2.out && compare_logs part/main.log full/main.log trl=0 norm=0 tel=0 > cmp2.out \
    && ok "aarch64: stopped at step 3 with a checkpoint and resumed, the same bits as the uninterrupted run" \
    || { bad "aarch64 resume"; tail -3 part2.out; cat cmp2.out 2>/dev/null; }

# ---- train_gpt2cu's host code on aarch64 (the simulator's trainer), against the CPU trainer
arm "$ARM/cuda_sim/train_gpt2cu" "${ARGS[@]}" -x 2 -v 0 -o gpu > gpu.out 2>&1 || { bad "train_gpt2cu (simulator) on aarch64 failed"; tail -3 gpu.out; }
compare_logs gpu/main.log full/main.log trl=1e-2 --first 2 > cmp3.out \
    && ok "train_gpt2cu's host code on aarch64 (simulated GPU): the CPU trainer's losses within bf16's rounding ($(head -1 cmp3.out | sed 's/^ *//'))" \
    || { bad "train_gpt2cu (simulator) on aarch64 against the CPU trainer"; cat cmp3.out; }
finish
