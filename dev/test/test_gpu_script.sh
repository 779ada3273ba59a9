#!/usr/bin/env bash
# Runs dev/test/test_gpu.sh, every part, on this machine without a GPU, so that a fault in the
# script itself (an unset variable under set -u, a misspelt command, a step that never reports, a
# summary or log pack that is not written) shows here and not in a GPU session's 15 minutes. On a
# copy of the sources, with programs standing in for the 17 CUDA binaries (each says "no CUDA GPU
# is visible" and exits 1, as a real one does here) installed through dev/gpu/prebuilt.sh as on the
# GPU machine, and the fixtures stubbed (their make target is up to date). Checks:
#  - the script ends with its "== done" line and exit status 1 (GPU steps fail here);
#  - prebuilt PASS, nothing compiled but the CPU trainer, the bad_no_gpu check PASS (it expects
#    that message);
#  - every step of every part reports exactly once (PASS, FAIL, TIMEOUT or SKIP), in the order of
#    the parts;
#  - nothing in its output or any step's log says "unbound variable", "syntax error", "command not
#    found" (but for nvidia-smi, absent here) or "test_gpu.sh: line N" (a shell error of its own);
#  - test_gpu_logs.tgz holds a log for every step that ran, and none that an earlier call left;
#  - the sanitizer and ncu steps (stand-ins for both tools) pass, the profile's per-kernel table
#    reaches the summary, but for racecheck of test_gpt2cu,
#    failed on purpose as on the H200, and rerun with synchronous launches; the racecheck filter
#    (our kernels by name) reaches compute-sanitizer as one argument; LLMC_TEST_GEMM_NO_CLUSTER=1
#    (cuBLASLt's algorithms without clusters) in racecheck's runs of test_gpt2cu and no other;
#  - with a budget (TEST_GPU_BUDGET) the steps that no longer fit say SKIP and the run still ends.
# Usage, from the repo root: bash dev/test/test_gpu_script.sh
source "$(dirname "$0")/lib.sh" test_gpu_script
command -v cc > /dev/null || { skip_or_fail test_gpu_script "a C compiler (cc)" "apt-get install gcc"; exit; }

gpu_machine_tree tree
stand_in_binaries tree 'fprintf(stderr, "error: no CUDA GPU is visible (stand-in for %s)\\n"); return 1;' \
    || bad "could not compile the stand-ins"
(cd tree && bash dev/gpu/prebuilt.sh pack > ../pack.txt 2>&1) || { bad "prebuilt.sh pack: $(tail -1 pack.txt)"; finish; }
for b in "${STAND_INS[@]}"; do rm -f "tree/$b"; done
# the fixtures, up to date for make (train_gpt2.py would take half a minute and 1 GB for d12)
mkdir -p tree/dev/test/fixtures
for f in tiny64 d12; do touch "tree/dev/test/fixtures/$f.bin" "tree/dev/test/fixtures/${f}_state.bin" "tree/dev/test/fixtures/${f}_traj.txt"; done

# compute-sanitizer and ncu stand-ins: each argument on a line of its own (how the script quoted
# them), then a clean report; but racecheck of test_gpt2cu fails as on the H200 (an error the tool
# cannot place) unless every launch is synchronous, to see the rerun that names the launch
mkdir bin
for t in compute-sanitizer ncu; do
    printf '#!/bin/sh\nfor a in "$@"; do echo "$a"; done >> %s/%s.args; echo "hook=${LLMC_TEST_GEMM_NO_CLUSTER:-}" >> %s/%s.args; echo "=====" >> %s/%s.args\n' \
        "$TMP" "$t" "$TMP" "$t" "$TMP" "$t" > "bin/$t"
    [ $t = compute-sanitizer ] && cat >> "bin/$t" <<'SH'
case " $* " in *" racecheck "*"test_gpt2cu "*)
    if [ -z "${CUDA_LAUNCH_BLOCKING:-}" ]; then
        echo "========= Internal Sanitizer Error: The Sanitizer failed to handle a hardware exception."
        echo "error: CUDA error cudaErrorIllegalAddress in cudaFuncSetAttribute(...) [llmc/cuda/attention.cuh:694]"
        exit 99
    fi
    echo "error: CUDA error cudaErrorIllegalAddress in kernel launch [llmc/cuda/layernorm.cuh:1]"; exit 99;;
esac
SH
    # ncu: --export writes the report; --import prints a raw page of one launch
    [ $t = ncu ] && cat >> "bin/$t" <<'SH'
prev=; for a in "$@"; do [ "$prev" = --export ] && touch "$a.ncu-rep"; prev=$a; done
case " $* " in *" --import "*)
    echo '"ID","Kernel Name","gpu__time_duration.sum"'; echo '"","","nsecond"'; echo '"0","gelu_forward_kernel","5,000"'; exit 0;;
esac
SH
    echo 'echo "========= ERROR SUMMARY: 0 errors"' >> "bin/$t"
    chmod +x "bin/$t"
done
# a log of an earlier call on the same machine, which this call's pack must not bring back
mkdir -p tree/build/gpu_test/logs tree/build/gpu_test/bench
echo stale > tree/build/gpu_test/logs/stale_step.log; echo stale > tree/build/gpu_test/bench/layers_stale.log
(cd tree && PATH="$TMP/bin:$PATH" OUT="$TMP/out" TEST_GPU_BUDGET=600 TEST_GPU_PREBUILT=yes PYTHON="$PY" timeout 600 bash dev/test/test_gpu.sh) > run.txt 2>&1
rc=$?
S=out/summary.txt
if grep -q "^== done in [0-9]*s: [0-9]* step(s) failed" "$S" 2> /dev/null && [ $rc -eq 1 ]; then
    ok "test_gpu.sh ran every part to its end ($(tail -1 "$S" | cut -d' ' -f3-)), exit status 1"
else
    bad "test_gpu.sh did not end as expected (exit $rc):"; tail -5 run.txt; tail -3 "$S" 2> /dev/null
fi
grep -q "^PASS    prebuilt" "$S" && ok "the stand-ins were installed through prebuilt.sh" || bad "no 'PASS prebuilt' line: $(grep -m1 prebuilt "$S")"
grep -q "^PASS    bad_no_gpu" "$S" && ok "bad_no_gpu passed on the stand-in's message" || bad "bad_no_gpu did not pass"
! grep -q "^PASS    build " "$S" || bad "something was built although the prebuilt binaries were installed"

# every step of test_gpu.sh, in its order of appearance in the script (names with a variable part:
# the loops' names written out)
expected=(env prebuilt build_cpu fixtures test_gpt2cu_tiny test_gpt2cu_d12 test_gpt2cu_tiny_cudnn test_gpt2cu_d12_cudnn
          test_gpt2cu_tiny_ge0 test_gpt2cu_d12_ge0 test_gpt2cu_d12_mt1 test_gpt2cu_d12_bg1 gpu_vs_cpu determinism_2proc at_auto gpu_log generate generate_speed hellaswag resume_bitwise fatal_checkpoint preempt resume_mt1 bad_no_gpu bad_too_large bad_arch
          single single_accum2 nccl_1rank nccl_1rank_zero1 nccl_debug_streams nccl_dropped_waits torchrun_1 torchrun_ctrl_c)
# MPI as test_gpu.sh finds it here: the system's (mpirun and mpicc), else none (no .carry/debs in the copy)
mpi=0; command -v mpirun > /dev/null && command -v mpicc > /dev/null && mpi=1
if [ $mpi = 1 ]; then
    expected+=(mpi_sanity mpi_np2 mpi_np2_zero1 mpi_zero1_resume_np2 mpi_zero1_resume_np1 mpi_nccl_shared_gpu mpi_kill_rank)
else
    expected+=(mpi_np2)  # one SKIP line naming the MPI steps
fi
expected+=(memory_d12 memory_d48 large_batch bench_d12 bench_attention bench_gelu bench_recompute bench_tune bench_biasgrad bench_layers d48 muon_kernel muon_gpu_vs_cpu muon_determinism)
[ $mpi = 1 ] && expected+=(muon_mpi_np2_zero1)
expected+=(muon_bench kernels)
got=$(sed -n 's/^\(PASS\|FAIL\|TIMEOUT\|SKIP\) *\([A-Za-z0-9_]*\).*/\2/p' "$S" | grep -v '^sanitize\|^profile' | paste -sd' ')
if [ "$got" = "${expected[*]}" ]; then
    ok "each of the ${#expected[@]} steps before the sanitizers reported once, in order"
else
    bad "steps reported: $got"; echo "  expected:       ${expected[*]}"
fi
# the sanitizers and the profiler: every step passes but racecheck of test_gpt2cu (the stand-in
# fails it as above), whose synchronous rerun follows it and puts the launch it names in the summary
want="sanitize_build sanitize_memcheck_test_gpt2cu sanitize_memcheck_attention sanitize_racecheck_test_gpt2cu sanitize_racecheck_test_gpt2cu_blocking sanitize_racecheck_attention sanitize_racecheck_workbenches profile_ncu profile_summary"
got=$(sed -n 's/^\(PASS\|FAIL\|TIMEOUT\|SKIP\) *\(sanitize[a-z0-9_]*\|profile[a-z_]*\).*/\2/p' "$S" | paste -sd' ')
failed=$(sed -n 's/^FAIL *\(sanitize[a-z0-9_]*\|profile[a-z_]*\).*/\1/p' "$S" | paste -sd' ')
if [ "$got" = "$want" ] && [ "$failed" = "sanitize_racecheck_test_gpt2cu sanitize_racecheck_test_gpt2cu_blocking" ] &&
   grep -q "^        error: .*layernorm.cuh:1" "$S"; then
    ok "the sanitizer and profiler steps ran, racecheck's unplaced error rerun with synchronous launches (its error line in the summary)"
else
    bad "sanitizer/profiler steps: '$got' (failed: '$failed'), expected '$want' with the two racecheck_test_gpt2cu failing"
fi
# racecheck's kernel filter: one argument naming our kernels only, in every racecheck run (test_gpt2cu,
# its rerun, the attention workbench, the 6 workbenches without cuBLAS)
filter=$(grep -A1 -x -- "--kernel-name" compute-sanitizer.args | grep "^regex=" | sort -u)
if [ "$(grep -c -x -- "--kernel-name" compute-sanitizer.args)" = 9 ] && [ "$(wc -l <<< "$filter")" = 1 ] &&
   grep -q "|attention_forward_kernel|" <<< "$filter" && grep -q "|layernorm_forward_kernel|" <<< "$filter" &&
   ! grep -qiE "nvjet|gemm|cublas|cudnn" <<< "$filter" && grep -qx -- "--no-cudnn" compute-sanitizer.args; then
    ok "racecheck follows our $(tr '|' '\n' <<< "${filter#regex=}" | wc -l) kernels, as one argument; the attention workbench without cuDNN"
else
    bad "the racecheck filter: $(grep -c -x -- "--kernel-name" compute-sanitizer.args) times, '${filter:0:120}...'"
fi
# the cluster-free matmuls (LLMC_TEST_GEMM_NO_CLUSTER=1) in racecheck's runs of test_gpt2cu (it
# and its synchronous rerun) and in no other sanitizer run
# runs of racecheck on test_gpt2cu, and runs where the hook and such a run do not go together
hooked=$(awk '/^hook=/ { h = $0; next } !/^=====$/ { run = run " " $0; next }
              { race = run ~ /racecheck/ && run ~ /test_gpt2cu/; n += race; odd += race != (h == "hook=1"); run = "" }
              END { print n + 0, odd + 0 }' compute-sanitizer.args)
[ "$hooked" = "2 0" ] && ok "LLMC_TEST_GEMM_NO_CLUSTER=1 in racecheck's 2 runs of test_gpt2cu only" \
    || bad "LLMC_TEST_GEMM_NO_CLUSTER in the sanitizer runs (racecheck runs of test_gpt2cu, runs that differ): $hooked"
wbs=$(grep -x "build/cuda/[a-z_]*" compute-sanitizer.args | sort -u | paste -sd' ')
[ "$wbs" = "build/cuda/adamw build/cuda/attention build/cuda/encoder build/cuda/fused_classifier build/cuda/gelu build/cuda/global_norm build/cuda/layernorm" ] \
    && ok "the sanitizers ran the attention workbench and the 6 without cuBLAS" || bad "the workbenches under the sanitizers: $wbs"
grep -qx -- "--clock-control" ncu.args && grep -qx "none" ncu.args && ok "ncu ran with --clock-control none" || bad "ncu's arguments: $(head -5 ncu.args | paste -sd' ')"
grep -q "^          gelu_forward_kernel *1 *0.005 *100.0%" "$S" && ok "the profile's per-kernel table in the summary" \
    || bad "no per-kernel table of the profile in the summary: $(grep -A3 profile_summary "$S" | paste -sd' ')"

mkdir logs_back && tar -xzf out/test_gpu_logs.tgz -C logs_back 2> /dev/null || bad "out/test_gpu_logs.tgz is missing or damaged"
missing=()
for s in $(sed -n 's/^\(PASS\|FAIL\|TIMEOUT\) *\([A-Za-z0-9_]*\).*/\2/p' "$S"); do
    [ "$s" = prebuilt ] || [ -f "logs_back/logs/$s.log" ] || missing+=("$s")
done
[ ${#missing[@]} -eq 0 ] && ok "the log pack holds every step's log" || bad "logs missing from the pack: ${missing[*]}"
[ ! -e logs_back/logs/stale_step.log ] && [ ! -e logs_back/bench/layers_stale.log ] && ok "no log of an earlier call in the pack" \
    || bad "the pack holds an earlier call's logs (stale_step.log, layers_stale.log)"
faults=$(cat run.txt logs_back/logs/*.log | grep -E "unbound variable|command not found|syntax error|test_gpu.sh: line [0-9]+" \
         | grep -v "nvidia-smi: command not found" | sort -u | head -5)
[ -z "$faults" ] && ok "no unbound variable, missing command or syntax error in the output and the logs" || bad "script faults: $faults"

# a budget: the steps that no longer fit say SKIP, and the run still ends with its summary. A step
# starts only while 30 s would be left after it and the 20 s the summary keeps, so with 49 s none
# does (the installation of the prebuilt binaries is not a step), whatever the machine's speed (the run above, with 600 s, shows steps that fit do run; a
# budget that lets the first steps in and not the later ones depends on how fast they fail here:
# 5 s for the whole run on a fast machine)
(cd tree && PATH="$TMP/bin:$PATH" OUT="$TMP/out2" TEST_GPU_BUDGET=49 PYTHON="$PY" timeout 120 bash dev/test/test_gpu.sh test bench) > run2.txt 2>&1
if grep -q "^SKIP .*(the time budget is used up)" out2/summary.txt && grep -q "^== done in" out2/summary.txt &&
   ! grep -v "^\(PASS\|FAIL\)    prebuilt" out2/summary.txt | grep -q "^\(PASS\|FAIL\|TIMEOUT\) "; then
    ok "TEST_GPU_BUDGET=49: every one of the $(grep -c '^SKIP .*budget' out2/summary.txt) steps skipped, the run ended with its summary"
else
    bad "TEST_GPU_BUDGET=49: a step ran, none skipped, or no summary"; grep "^\(PASS\|FAIL\|TIMEOUT\) " out2/summary.txt; tail -3 out2/summary.txt
fi
finish
