#!/usr/bin/env bash
# Data-parallel training on CPU ranks with real OpenMPI (oversubscribed on a small machine).
#  1. mpirun -np 1/2/4 at the same -d: the same per-step losses (1e-5 relative) for 10 steps and
#     the same final parameters; only rank 0 prints step lines; one main.log, one model file per
#     checkpoint, a state file from every rank; identical initial parameters on every rank.
#  2. resume with -y 1 on the same rank count continues bit for bit; on another rank count it
#     continues within 1e-5.
#  3. bad launches: ranks with different flags or data (a same-name, same-size shard of other
#     tokens too), a world size that does not divide the
#     batch, a rank that dies (the others must exit within 60 s), torchrun variables without MPI.
#  4. launches without MPI (dev/test/launch_probe: rank discovery and the TCP bootstrap of
#     train_gpt2cu, on loopback): half of torchrun's variables; torchrun's ranks where an MPI
#     launcher's variables reach its processes too (torchrun under srun); srun's ranks for the
#     tasks of srun --mpi=pmix (a build without MPI, as launch_probe is); the handshake against
#     another world size, a rank given twice, another job's rank 0 on the port, a program there
#     that is not rank 0: each an error line on the rank that finds it, at once.
#  5. stopping an mpirun job (SIGUSR1, the recipe's signals); 6. the threads of ranks that share CPUs.
source "$(dirname "$0")/lib.sh" test_mpi "${1:-./train_gpt2}"
require_mpi test-mpi
$PY "$ROOT/dev/bench/make_random_shard.py" train.bin 60000 1 512
$PY "$ROOT/dev/bench/make_random_shard.py" val.bin 4000 2 512
$PY "$ROOT/dev/bench/make_random_shard.py" other.bin 60000 3 512
ARGS=(-i train.bin -j val.bin -e L2:C64:H4:T64:V512 -b 2 -t 32 -d 512 -x 10 -v 5 -m 4 -s 0 -l 1e-3 -u 2 -k cosine -q 0.1 -c 0.1)

# ---- 1. rank counts
for np in 1 2 4; do
    "${MPIRUN[@]}" -np $np "$TRAINER" "${ARGS[@]}" -o "run$np" -n 5 > "out$np.txt" 2> "err$np.txt" || { bad "np=$np exited non-zero"; cat "err$np.txt"; }
    n=$(grep -c '^step [0-9]*/10 |' "out$np.txt")
    [ "$n" -eq 10 ] || bad "np=$np: $n step lines printed, expected 10 (only rank 0 prints)"
    [ "$(ls run$np | grep -c '^main.log')" -eq 1 ] || bad "np=$np: not exactly one main.log"
    [ "$(ls run$np | grep -c '^model_00000010.bin$')" -eq 1 ] || bad "np=$np: no single model file for step 10"
    [ "$(ls run$np | grep -c '^state_00000010_')" -eq $np ] || bad "np=$np: $(ls run$np | grep -c '^state_00000010_') state files, expected $np"
    if [ $np -gt 1 ]; then
        grep -q "model parameters identical on all $np ranks" "out$np.txt" || bad "np=$np: initial parameters not checked equal"
    fi
done
echo "np=2 vs np=1:"; compare_logs run2/main.log run1/main.log trl=1e-5 tel=1e-5 || bad "np=2 losses differ from np=1"
echo "np=4 vs np=1:"; compare_logs run4/main.log run1/main.log trl=1e-5 tel=1e-5 || bad "np=4 losses differ from np=1"
$PY - run1/model_00000010.bin run2/model_00000010.bin run4/model_00000010.bin <<'EOF' || bad "final parameters differ across rank counts"
import sys, numpy as np
ref = np.fromfile(sys.argv[1], dtype="<f4", offset=1024)
for p in sys.argv[2:]:
    x = np.fromfile(p, dtype="<f4", offset=1024)
    d = np.abs(x - ref).max() / np.abs(ref).max()
    print(f"final parameters {p.split('/')[0]} vs run1: max|diff|/max|ref| = {d:.1e}")
    if not d <= 1e-5: sys.exit(1)
EOF

# ---- 2. resume: drop the last checkpoint of the np=2 run and resume from step 5
cp -r run2 resume2
rm resume2/DONE_00000010
echo "flight record of rank 1 of 2 (pid" > resume2/flight_rank1.txt.tmp  # a run killed while writing it
"${MPIRUN[@]}" -np 2 "$TRAINER" "${ARGS[@]}" -o resume2 -n 5 -y 1 > out_r2.txt 2>&1 || { bad "resume np=2 failed"; tail out_r2.txt; }
grep -q "resumed from checkpoint 5" out_r2.txt || bad "np=2 did not resume from checkpoint 5"
[ -e resume2/flight_rank1.txt.tmp ] && bad "a flight record's .tmp of the run before stayed in -o" \
    || ok "the half-written flight record of a run killed while writing it is removed at the next start"
# the resumed run appends steps 6-10 to the copied main.log; for a step logged twice the later wins
echo "resume np=2 -> np=2 (bitwise):"; compare_logs resume2/main.log run2/main.log trl=0 --last 5 || bad "resume on the same rank count is not bitwise"
for np in 1 4; do
    cp -r run2 "resume2to$np"
    rm "resume2to$np/DONE_00000010"
    "${MPIRUN[@]}" -np $np "$TRAINER" "${ARGS[@]}" -o "resume2to$np" -n 5 -y 1 > "out_r$np.txt" 2>&1 || { bad "resume np=2 -> $np failed"; tail "out_r$np.txt"; }
    echo "resume np=2 -> np=$np:"; compare_logs "resume2to$np/main.log" run2/main.log trl=1e-5 --last 5 || bad "resume on $np ranks differs"
done
# checkpoint 10 begun by 4 ranks and never completed (rank 0 killed before its marker), then resumed
# on 2 ranks with -nk 1: once step 10 is written again and rotated out, none of its 4 state files stays
LLMC_FAULT=done:10 "${MPIRUN[@]}" -x LLMC_FAULT -np 4 "$TRAINER" "${ARGS[@]}" -o stale -n 5 > out_stale.txt 2>&1
[ -f stale/state_00000010_00003.bin ] && [ ! -e stale/DONE_00000010 ] || bad "the killed 4-rank run did not leave checkpoint 10 incomplete: $(ls stale | tr '\n' ' ')"
"${MPIRUN[@]}" -np 2 "$TRAINER" "${ARGS[@]}" -x 15 -o stale -n 5 -nk 1 -y 1 > out_stale2.txt 2>&1 || { bad "the 2-rank resume failed"; tail -n 3 out_stale2.txt; }
[ "$(ls stale | grep '^\(state\|model\|DONE\)_' | tr '\n' ' ')" = "DONE_00000015 model_00000015.bin state_00000015_00000.bin state_00000015_00001.bin " ] \
    && ok "-nk 1 after a resume on fewer ranks: only checkpoint 15 is left (the 4-rank attempt's state files of step 10 went with it)" \
    || bad "-nk 1 after a resume on fewer ranks left: $(ls stale | tr '\n' ' ')"

# ---- 3. bad launches
# the error must come within the timeout and name the problem
expect_fail() {  # expect_fail <name> <words> <command...>: expect_error (lib.sh), within 60 s
    local name=$1 words=$2
    shift 2
    expect_error "$name" "$words" timeout 60 "$@"
}
expect_fail "ranks with different flags" "have different flags or data files" \
    "${MPIRUN[@]}" -np 1 "$TRAINER" "${ARGS[@]}" -l 1e-3 : -np 1 "$TRAINER" "${ARGS[@]}" -l 2e-3
expect_fail "ranks with different data" "have different flags or data files" \
    "${MPIRUN[@]}" -np 1 "$TRAINER" "${ARGS[@]}" : -np 1 "$TRAINER" "${ARGS[@]}" -i other.bin
# each node with its own copy of the data (the same command line, run in another folder), rank 1's
# shard of the same name and size but other tokens (stale, zeroed, re-tokenized)
mkdir -p node0 node1 && cp train.bin val.bin node0/ && cp val.bin node1/ && cp other.bin node1/train.bin
expect_fail "ranks with a same-size shard of other tokens" "have different flags or data files" \
    "${MPIRUN[@]}" -np 1 -wdir "$PWD/node0" "$TRAINER" "${ARGS[@]}" : -np 1 -wdir "$PWD/node1" "$TRAINER" "${ARGS[@]}"
expect_fail "a bad flag on rank 1 only (rank 1 says so)" "\[rank 1\] error: unknown flag -qq (see --help)" \
    "${MPIRUN[@]}" -np 1 "$TRAINER" "${ARGS[@]}" : -np 1 "$TRAINER" "${ARGS[@]}" -qq 1
ERROR_LINES=2 expect_fail "a bad flag on every rank (each says so)" "unknown flag -qq (see --help)" \
    "${MPIRUN[@]}" -np 2 "$TRAINER" "${ARGS[@]}" -qq 1
ERROR_LINES=3 expect_fail "world size does not divide the batch (each rank says so)" "not divisible by B\*T\*ranks = 2\*32\*3 = 192" \
    "${MPIRUN[@]}" -np 3 "$TRAINER" "${ARGS[@]}"
RANK=0 WORLD_SIZE=2 expect_fail "torchrun variables without MPI" "use: mpirun -np 2" "$TRAINER" "${ARGS[@]}"
# llm.c's launch flags: where mpirun set the ranks they must agree with it; by hand they need both
ERROR_LINES=2 expect_fail "-pn against mpirun's count (each rank says so)" "-pn 3, but mpirun started 2 processes: drop -pn, or launch 3" \
    "${MPIRUN[@]}" -np 2 "$TRAINER" "${ARGS[@]}" -pn 3
expect_fail "-pr against mpirun's rank" "-pr 1, but mpirun made this process rank 0" "${MPIRUN[@]}" -np 2 "$TRAINER" "${ARGS[@]}" -pr 1
expect_fail "-pn by hand without -pr" "-pn 2 -pr -1: processes started by hand need both" "$TRAINER" "${ARGS[@]}" -pn 2
expect_fail "-pn/-pr by hand without MPI" "2 processes (launcher: -pn/-pr), but train_gpt2 runs several processes only with MPI" \
    "$TRAINER" "${ARGS[@]}" -pn 2 -pr 1
"${MPIRUN[@]}" -np 2 "$TRAINER" "${ARGS[@]}" -pn 2 -pg 2 -x 2 -o agree > agree.txt 2>&1 && grep -q "^trainer .* 2 process(es) (mpirun)" agree.txt \
    && ok "mpirun -np 2 with -pn 2 -pg 2, which agree with it: trains" || { bad "-pn 2 -pg 2 under mpirun -np 2"; tail -n 3 agree.txt; }

# -y 1 of a fine-tune whose -e file is on one node only (rank 1's folder lacks it): that rank takes
# the checkpoint's model and says so, and the ranks' flags still agree
mkdir -p ftn0 ftn1 && $PY "$ROOT/train_gpt2.py" --model L2:C64:H4:T64:V512 --seed 1 --write-model ftn0/base.bin > /dev/null
FT=("${ARGS[@]}" -i "$PWD/train.bin" -j "$PWD/val.bin" -e base.bin -o "$PWD/ftrun" -n 5)
"${MPIRUN[@]}" -np 2 -wdir "$PWD/ftn0" "$TRAINER" "${FT[@]}" -x 5 > ft1.txt 2>&1 || { bad "fine-tune from base.bin on 2 ranks failed"; tail -n 3 ft1.txt; }
"${MPIRUN[@]}" -np 1 -wdir "$PWD/ftn0" "$TRAINER" "${FT[@]}" -y 1 : -np 1 -wdir "$PWD/ftn1" "$TRAINER" "${FT[@]}" -y 1 > ft2.txt 2>&1 \
    && grep -qx "\[rank 1\] -e base.bin is not there: -y 1 takes the model from checkpoint 5 in $PWD/ftrun ($PWD/ftrun/model_00000005.bin)" ft2.txt \
    && grep -q "^step 10/10" ft2.txt && ok "-e on one node only, -y 1: $(grep -m1 'is not there' ft2.txt | cut -c1-90)..." \
    || { bad "-y 1 with -e on one node only"; grep -v "^step" ft2.txt | tail -n 4; }

# a rank killed with SIGKILL mid-run: the others must not hang
# (rank 1 found by its -o, a folder of this test's own: other tests may run ./train_gpt2 beside it)
"${MPIRUN[@]}" -np 2 "$TRAINER" "${ARGS[@]}" -x 100000 -v 0 -o "$TMP/dies" > dies.txt 2>&1 &
MPI_PID=$!
wait_line "^step 2/" dies.txt 60
victim=$(rank_pid 1 "$TRAINER .*-o $TMP/dies\$")
start=$(date +%s)
kill -9 "$victim"
for i in $(seq 600); do kill -0 $MPI_PID 2>/dev/null || break; sleep 0.1; done
if kill -0 $MPI_PID 2>/dev/null; then
    bad "a rank was killed and the job was still running 60 s later"; kill -9 $MPI_PID; pkill -9 -f "$TMP/dies"
else
    wait $MPI_PID; rc=$?
    [ $rc -ne 0 ] || bad "job exited 0 after a rank was killed"
    echo "ok   a rank killed with SIGKILL: the job ended in $(( $(date +%s) - start )) s with exit code $rc"
fi

# a process of the job that never reaches MPI_Init (a node stuck before the trainer ran): the others
# waited in MPI_Init for good; -pt bounds it, and the job ends (rank 1 is a sleep, mpirun ends it)
start=$(date +%s)
timeout -k 5 60 "${MPIRUN[@]}" -np 2 sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then exec sleep 120; fi; exec "$0" "$@"' \
    "$TRAINER" "${ARGS[@]}" --comm-timeout=3 > noinit.txt 2>&1; rc=$?
took=$(( $(date +%s) - start ))
[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $took -lt 30 ] \
    && grep -q "^\[rank 0\] error: MPI_Init did not complete within -pt 3 s: a process of this job never reached it" noinit.txt \
    && ok "a rank that never reaches MPI_Init: rank 0 stops after -pt 3 s, the job in $took s (exit $rc)" \
    || { bad "a rank that never reaches MPI_Init: exit $rc after $took s"; grep -v "^ *$" noinit.txt | head -n 4; }

# ---- 4. launches without MPI, on loopback
PROBE=("$ROOT/dev/test/launch_probe" "${ARGS[@]}" -d 384 -pt 20)  # -d: 2 and 3 ranks
expect_fail "RANK without WORLD_SIZE" "RANK=1 is set but WORLD_SIZE is not: torchrun sets both" env RANK=1 "${PROBE[@]}"
# a SLURM script that exports WORLD_SIZE for other tools: srun's ranks, not half of torchrun's pair
env SLURM_PROCID=0 SLURM_NTASKS=1 WORLD_SIZE=1 "$TRAINER" "${ARGS[@]}" -x 1 -v 0 > slurmws.txt 2>&1 \
    && grep -q "^trainer .* 1 process(es) (slurm)" slurmws.txt && ok "srun's variables with WORLD_SIZE exported: a SLURM launch" \
    || { bad "srun's variables with WORLD_SIZE exported"; tail -n 2 slurmws.txt; }
expect_fail "LOCAL_RANK past LOCAL_WORLD_SIZE" "LOCAL_RANK=5 and LOCAL_WORLD_SIZE=2: the local rank must be below" \
    env RANK=1 WORLD_SIZE=2 LOCAL_RANK=5 LOCAL_WORLD_SIZE=2 "${PROBE[@]}"
expect_fail "-pr past -pn by hand" "-pn 2 -pr 2: .*: -pr is past the last rank" "${PROBE[@]}" -pn 2 -pr 2
expect_fail "RANK=0 WORLD_SIZE=0" "RANK=0 and WORLD_SIZE=0: the world size must be at least 1" env RANK=0 WORLD_SIZE=0 "${PROBE[@]}"
# probes NAME "ENV..." ...: a probe per ENV at once, on a free bootstrap port; NAME.out: all their lines
probes() {
    local name=$1 i=0 pids=() port
    port=$(free_port)
    shift
    for e in "$@"; do
        env $e MASTER_ADDR=127.0.0.1 LLMC_BOOTSTRAP_PORT=$port timeout 60 "${PROBE[@]}" > "$name.$i.out" 2>&1 &
        pids+=($!)
        i=$((i + 1))
        sleep 0.2  # in order: rank 0 listening first where it is first
    done
    wait "${pids[@]}"
    cat "$name".*.out > "$name.out"
}
probe_has() {  # probe_has NAME WHAT LINE...: each LINE (a grep pattern) in NAME.out, within 10 s
    local name=$1 what=$2 line
    shift 2
    for line in "$@"; do grep -q "$line" "$name.out" || { bad "$what: no line '$line'"; cat "$name.out"; return; }; done
    ok "$what: $(grep -h 'error:' "$name.out" | head -n 2 | tr '\n' ' ' | cut -c1-240)"
}
# an sbatch script's own process (SLURM_PROCID 0 of the job's SLURM_NTASKS, no srun): the wait ends saying so
expect_fail "SLURM's variables with no other rank (an sbatch script outside srun)" "run from an sbatch script itself, outside srun" \
    env SLURM_PROCID=0 SLURM_NTASKS=2 MASTER_ADDR=127.0.0.1 LLMC_BOOTSTRAP_PORT=$(free_port) "${PROBE[@]}" -pt 2
TE="TORCHELASTIC_RUN_ID=job7 PMI_SIZE=2 PMI_RANK=0 WORLD_SIZE=2"
probes under_srun "$TE RANK=0" "$TE RANK=1"
[ "$(grep -c '^probe rank [01] of 2 local [01] host .* launcher torchrun token' under_srun.out)" = 2 ] \
    && ok "torchrun's processes with an MPI launcher's variables too (torchrun under srun): torchrun's ranks, one bootstrap" \
    || { bad "torchrun under srun"; cat under_srun.out; }
# srun --mpi=pmix's tasks (PMIX_RANK, no size of MPI's) of a build without MPI, as launch_probe is:
# srun's ranks, one bootstrap (each had run alone as rank 0 of 1)
PX="SLURM_NTASKS=2 SLURM_JOB_ID=7"
probes pmix "$PX PMIX_RANK=0 SLURM_PROCID=0 SLURM_LOCALID=0" "$PX PMIX_RANK=1 SLURM_PROCID=1 SLURM_LOCALID=1"
[ "$(grep -c '^probe rank \([01]\) of 2 local \1 host .* launcher slurm token [1-9]' pmix.out)" = 2 ] \
    && [ "$(grep -o 'token [0-9]*' pmix.out | sort -u | wc -l)" = 1 ] \
    && ok "srun --mpi=pmix's tasks of a build without MPI: srun's ranks, one bootstrap" \
    || { bad "srun --mpi=pmix's tasks of a build without MPI"; cat pmix.out; }
probes world "RANK=0 WORLD_SIZE=2" "RANK=1 WORLD_SIZE=3"
probe_has world "another world size" "^\[rank 0\] error: bootstrap: a process says it is rank 1 of 3, but this rank 0 has 2 processes" \
    "^\[rank 1\] error: bootstrap: rank 0 at 127.0.0.1:[0-9]* has 2 processes, this process says 3"
probes twice "RANK=0 WORLD_SIZE=3" "RANK=1 WORLD_SIZE=3" "RANK=1 WORLD_SIZE=3"
probe_has twice "rank 1 twice" "^\[rank 0\] error: bootstrap: two processes say they are rank 1: give each process its own rank" \
    "^\[rank 1\] error: bootstrap: rank 0 at 127.0.0.1:[0-9]* already has a rank 1"
# a second rank 1 that comes after the first joined (rank 0 no longer waits for anyone): told at once,
# while rank 0 goes on (was a wait of -pt for a rank 0 that no longer listened)
port=$(free_port)
MASTER_ADDR=127.0.0.1 LLMC_BOOTSTRAP_PORT=$port RANK=0 WORLD_SIZE=2 LAUNCH_PROBE_HOLD=6 timeout 60 "${PROBE[@]}" > late.0.out 2>&1 &
r0=$!
sleep 0.3
MASTER_ADDR=127.0.0.1 LLMC_BOOTSTRAP_PORT=$port RANK=1 WORLD_SIZE=2 timeout 60 "${PROBE[@]}" > late.1.out 2>&1 || bad "the first rank 1 failed"
start=$(date +%s)
MASTER_ADDR=127.0.0.1 LLMC_BOOTSTRAP_PORT=$port RANK=1 WORLD_SIZE=2 timeout 60 "${PROBE[@]}" > late.2.out 2>&1 && bad "the late rank 1 exited 0"
late_s=$(( $(date +%s) - start ))
wait $r0 || bad "rank 0 failed after a late rank 1 was turned away"
cat late.*.out > late.out
probe_has late "rank 1 twice, the second after the launch completed (in ${late_s} s)" \
    "^\[rank 1\] error: bootstrap: rank 0 at 127.0.0.1:[0-9]* already has a rank 1" \
    "^\[rank 0\] warning: bootstrap: after all 2 ranks joined, a process with a rank already taken came and was told to stop; the run goes on" \
    "^probe rank 0 of 2 local 0"
[ $late_s -le 3 ] || bad "the late rank 1 took ${late_s} s to stop"
# a connection that never says a word (a port scanner, a health check) before rank 1: rank 0 turns
# to the next one after BS_HELLO_SECONDS, and the launch completes
port=$(free_port)
MASTER_ADDR=127.0.0.1 LLMC_BOOTSTRAP_PORT=$port RANK=0 WORLD_SIZE=2 timeout 60 "${PROBE[@]}" > idle.0.out 2>&1 &
r0=$!
sleep 0.5
$PY -c "import socket, sys, time; s = socket.create_connection(('127.0.0.1', int(sys.argv[1]))); time.sleep(8)" $port &
idle=$!
sleep 0.3
MASTER_ADDR=127.0.0.1 LLMC_BOOTSTRAP_PORT=$port RANK=1 WORLD_SIZE=2 timeout 60 "${PROBE[@]}" > idle.1.out 2>&1
rc1=$?; wait $r0; rc0=$?; kill $idle 2> /dev/null; wait $idle 2> /dev/null
[ $rc0 = 0 ] && [ $rc1 = 0 ] && ok "a silent connection before rank 1: the launch completes" \
    || { bad "a silent connection before rank 1 (exit $rc0, $rc1)"; cat idle.0.out idle.1.out | grep -v '^probe rank . batch'; }
# rank 1 behind a forwarder (ssh -L, a container's published port) started before rank 0: the
# forwarder takes each connection and closes it while rank 0 is not listening; once it is, the
# launch completes
fport=$(free_port); port=$(free_port)
$PY -c "
import socket, sys, threading
src, dst = int(sys.argv[1]), int(sys.argv[2])
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', src)); s.listen()
def pipe(a, b):
    while (d := a.recv(65536)): b.sendall(d)
    b.shutdown(socket.SHUT_WR)
while True:
    c, _ = s.accept()
    try: t = socket.create_connection(('127.0.0.1', dst))
    except OSError: c.close(); continue
    threading.Thread(target=pipe, args=(c, t), daemon=True).start(); threading.Thread(target=pipe, args=(t, c), daemon=True).start()" $fport $port &
fwd=$!
MASTER_ADDR=127.0.0.1 LLMC_BOOTSTRAP_PORT=$fport RANK=1 WORLD_SIZE=2 timeout 60 "${PROBE[@]}" -pt 20 > fwd.1.out 2>&1 &
r1=$!
sleep 2
MASTER_ADDR=127.0.0.1 LLMC_BOOTSTRAP_PORT=$port RANK=0 WORLD_SIZE=2 timeout 60 "${PROBE[@]}" -pt 20 > fwd.0.out 2>&1
rc0=$?; wait $r1; rc1=$?; kill $fwd 2> /dev/null; wait $fwd 2> /dev/null
[ $rc0 = 0 ] && [ $rc1 = 0 ] && ok "rank 1 through a forwarder, 2 s before rank 0 listens: the launch completes" \
    || { bad "rank 1 through a forwarder (exit $rc0, $rc1)"; cat fwd.0.out fwd.1.out | grep -v '^probe rank . batch'; }
PROBE+=(-pt 3)  # rank 0 of the one job below waits for a rank 1 that never comes
probes jobs "RANK=0 WORLD_SIZE=2 SLURM_JOB_ID=101" "RANK=1 WORLD_SIZE=2 SLURM_JOB_ID=102"
probe_has jobs "two jobs on one port" "^\[rank 1\] error: bootstrap: rank 0 at 127.0.0.1:[0-9]* belongs to another job (SLURM_JOB_ID differs)"
port=$(free_port)
$PY -c "
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen()
c, _ = s.accept(); c.recv(64); c.sendall(b'HTTP/1.0 400 Bad Request\r\n\r\n'); c.close()" $port &
sleep 0.5
LLMC_BOOTSTRAP_PORT=$port MASTER_ADDR=127.0.0.1 RANK=1 WORLD_SIZE=2 timeout 60 "${PROBE[@]}" > foreign.out 2>&1
probe_has foreign "another program on the port" "error: bootstrap: the program that answers at 127.0.0.1:$port is not rank 0 of this trainer"
# an older build (the handshake's first version: magic "LLMC" and the rank, then a 4-byte size and
# the id) on either side: rank 0 of this build stops at once, a rank of this build at its -pt, each
# saying so
port=$(free_port)
MASTER_ADDR=127.0.0.1 LLMC_BOOTSTRAP_PORT=$port RANK=0 WORLD_SIZE=2 timeout 60 "${PROBE[@]}" > oldclient.out 2>&1 &
r0=$!
$PY -c "
import socket, struct, sys, time
for _ in range(50):
    try: s = socket.create_connection(('127.0.0.1', int(sys.argv[1]))); break
    except OSError: time.sleep(0.1)
s.sendall(struct.pack('<II', 0x4c4c4d43, 1)); size = s.recv(4)
print('old rank 1 read size', struct.unpack('<I', size)[0] if len(size) == 4 else None)" $port > oldclient.py.out
wait $r0
grep -q "old rank 1 read size 4294967295" oldclient.py.out || bad "the old build's rank 1 was not told an impossible id size: $(cat oldclient.py.out)"
probe_has oldclient "a rank of an older build" "^\[rank 0\] error: bootstrap: a process of an older build of this trainer connected"
port=$(free_port)
$PY -c "
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen()
s.settimeout(30)
while True:
    c, _ = s.accept(); c.recv(8); c.close()  # the old rank 0: a hello without its magic is closed" $port &
old0=$!
sleep 0.5
LLMC_BOOTSTRAP_PORT=$port MASTER_ADDR=127.0.0.1 RANK=1 WORLD_SIZE=2 timeout 60 "${PROBE[@]}" > oldserver.out 2>&1
kill $old0 2> /dev/null
probe_has oldserver "rank 0 of an older build (within -pt: a forwarder closes alike while its target is not up)" \
    "error: bootstrap: could not get the NCCL id from rank 0 at 127.0.0.1:$port within 3 s; the port closed this rank's hello [0-9]* times without an answer: rank 0 is an older build"
wait

# ---- 5. stopping an mpirun job. A stop signal to run_gpt2_124M.sh (NGPU=2): the script passes it on as
# SIGUSR1, which mpirun forwards (its own SIGINT/SIGTERM end the job: SIGTERM to the ranks 1 s
# later, SIGKILL 1 s after that); the ranks checkpoint, mpirun and the script exit 0.
# SIGTERM to the script's PID alone (kill PID, docker stop; it had reached no rank), and Ctrl-C
# (SIGINT to the script's process group in a new session, whose SIGINT is not ignored as a
# script's background job's is; it had reached mpirun alone)
mkdir -p fw && ln -sf "$PWD/train.bin" fw/fineweb_train_000001.bin && ln -sf "$PWD/val.bin" fw/fineweb_val_000000.bin
recipe_stop() {  # recipe_stop NAME HOW: the recipe's run in NAME/, stopped after step 2 by HOW (pid or group)
    $PY - "$1" "$2" "$ROOT/scripts/run_gpt2_124M.sh" "${ARGS[@]:4}" -x 100000 -s 0 -v 0 -o "$TMP/$1" > "$1.txt" 2>&1 << 'PYEOF'
import os, signal, subprocess, sys, time
name, how, script, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
signal.signal(signal.SIGINT, signal.SIG_DFL)
env = dict(os.environ, NGPU="2", TRAINER=os.environ["TRAINER_ABS"], DATA=os.getcwd() + "/fw")
with open(name + ".out", "w") as out:
    p = subprocess.Popen(["bash", script] + args, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
for _ in range(1200):
    if "step 2/" in open(name + ".out").read(): break
    time.sleep(0.05)
if how == "pid": os.kill(p.pid, signal.SIGTERM)
else: os.killpg(p.pid, signal.SIGINT)
try: print(p.wait(timeout=60))
except subprocess.TimeoutExpired: os.killpg(p.pid, signal.SIGKILL); print("timeout")
PYEOF
    local rc=$(tail -1 "$1.txt") what="run_gpt2_124M.sh NGPU=2, $3"
    [ "$rc" = 0 ] && grep -q "^mpirun: Forwarding signal 10 to job" "$1.out" && grep -q "^stopped by a signal after step" "$1.out" \
        && ! grep -q "launcher exited" "$1.out" && ls "$1" | grep -q '^DONE_' \
        && ok "$what: the ranks checkpointed ($(ls "$1" | grep -m1 DONE_)), mpirun and the script exit 0" \
        || { bad "$what: exit '$rc', checkpoints: $(ls "$1" 2> /dev/null | grep DONE_ | tr '\n' ' ')"; grep -v '^step' "$1.out" | tail -n 4; }
}
# mpirun by hand: the banner names mpirun's PID for SIGUSR1, which stops the job with a checkpoint
"${MPIRUN[@]}" -np 2 "$TRAINER" "${ARGS[@]}" -x 100000 -s 0 -v 0 -o usr1 > usr1.out 2>&1 &
job=$!
wait_line '^step 2/' usr1.out 60
pid=$(sed -n 's/^to stop with a checkpoint: kill -USR1 \([0-9]*\) (mpirun passes it on.*/\1/p' usr1.out)
[ -n "$pid" ] && kill -USR1 "$pid"
timeout 60 tail --pid=$job -f /dev/null; kill -9 $job 2> /dev/null
wait $job && grep -q "^stopped by a signal after step" usr1.out && ls usr1 | grep -q '^DONE_' \
    && ok "mpirun by hand: kill -USR1 <the PID its banner names>: the ranks checkpointed ($(ls usr1 | grep -m1 DONE_)), mpirun exits 0" \
    || { bad "mpirun by hand, SIGUSR1 to the PID of its banner ('$pid')"; grep -v '^step' usr1.out | tail -n 4; }
export TRAINER_ABS=$(realpath "$TRAINER")  # the recipe runs in the repository's root
recipe_stop rstop_pid pid "SIGTERM to the script's PID alone"
recipe_stop rstop_ctrlc group "Ctrl-C (SIGINT to its process group)"

# ---- 6. threads: ranks that may run on the same CPUs (--bind-to none) share them out, OMP_NUM_THREADS
# unset (nproc: coreutils' count of the CPUs this process may run on); the plan's attention buffers are per thread,
# so its line shows the count OpenMP took. One CPU each (mpirun's core binding): nothing to share.
# OMP_NUM_THREADS that oversubscribes the CPUs: a warning.
cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # (nproc takes OMP_NUM_THREADS for its answer where set)
want=$(( cpus / 2 > 1 ? cpus / 2 : 1 ))
env -u OMP_NUM_THREADS -u OPENBLAS_NUM_THREADS "${MPIRUN[@]}" -np 2 "$TRAINER" "${ARGS[@]}" --plan 2 > thr.out 2>&1
grep -q "^threads: $want per process (2 processes share $cpus CPUs here; OMP_NUM_THREADS sets another count)$" thr.out \
    && grep -q "per-thread product buffers ($want threads)" thr.out \
    && ok "2 ranks on the same $cpus CPUs, OMP_NUM_THREADS unset: $want thread(s) each, in the plan too" \
    || { bad "2 ranks on the same CPUs: not $want thread(s) each"; grep -i "thread" thr.out | head -n 3; }
if [ "$cpus" -ge 2 ]; then
    env -u OMP_NUM_THREADS mpirun --allow-run-as-root --bind-to core -np 2 "$TRAINER" "${ARGS[@]}" --plan 2 > thr_core.out 2>&1
    ! grep -q "^threads: \|^warning: OMP" thr_core.out && grep -q "per-thread product buffers (1 threads)" thr_core.out \
        && ok "2 ranks bound to a core each: 1 thread each, nothing said" \
        || { bad "2 ranks bound to a core each"; grep -i "thread\|error" thr_core.out | head -n 3; }
    OMP_NUM_THREADS=$cpus "${MPIRUN[@]}" -np 2 "$TRAINER" "${ARGS[@]}" --plan 2 > thr_over.out 2>&1
    grep -q "^warning: OMP_NUM_THREADS=$cpus: 2 processes share $cpus CPUs here with $cpus threads each" thr_over.out \
        && ok "OMP_NUM_THREADS=$cpus for 2 ranks on $cpus CPUs: $(grep -o 'warning: OMP.*slows every step' thr_over.out)" \
        || { bad "OMP_NUM_THREADS=$cpus on 2 ranks sharing $cpus CPUs: no warning"; head -n 3 thr_over.out; }
fi

finish
