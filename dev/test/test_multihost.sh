#!/usr/bin/env bash
# Several hosts on one machine: two Linux network namespaces, node1 and node2, joined by a veth pair
# with addresses that exist only between them, each with its own hostname; processes of a host run
# in its namespace; the output dir is on the machine's disk, seen by both (a shared filesystem).
# The CPU trainer stands in for the GPU one (launch, rank discovery, bootstrap, data layout,
# checkpoints and failure handling are the same host code).
#  1. OpenMPI across hosts: scripts/multi_node/mpirun_hostfile.sh with a hostfile of 2 hosts x 2
#     slots (its rsh launcher through an agent that enters the host's namespace; TCP between hosts)
#     gives the losses of 1 process with 4x accumulation on the same data; given SIGTERM, it
#     stops the 4 ranks with a checkpoint (passed on to mpirun as SIGUSR1) and exits 0.
#  2. A real SLURM (slurmctld, a slurmd per host, munge; no cgroups): sbatch
#     scripts/multi_node/slurm.sbatch on 2 nodes x 2 tasks, through srun --mpi=pmix: the same
#     losses; with SRUN_MPI=none, the ranks found from SLURM_*, meeting through the TCP bootstrap,
#     read together what one process reads (dev/test/launch_probe); train_gpt2 itself refuses. So
#     do a build without MPI (the probe) under srun --mpi=pmix, slurm.sbatch's default, the ranks
#     of llm.c's multi-node scripts (-pn/-pr/-pg from SLURM_*, -pi fs or -pi tcp -ps)
#     and the same processes started by hand on each host.
#  3. A host is lost (all its processes SIGKILLed, or frozen with SIGSTOP) under mpirun and under
#     SLURM: every rank left exits non-zero within -pt + 30 s with a line naming the step.
#  4. After it, -y 1 on one process of the remaining host resumes the newest complete checkpoint
#     and continues with an uninterrupted run's losses. Under SLURM, the time limit's SIGUSR1 to
#     slurm.sbatch: the run checkpoints, the job requeues itself, its second start resumes with an
#     uninterrupted run's losses; with REQUEUE=0 the job ends instead. A crash under SLURM is
#     relaunched within the job, an error that repeats is not (a stand-in trainer); a crash as the
#     time limit nears requeues the job where that start wrote a checkpoint, else ends it.
#  5. Bad input: a hostfile naming an unknown host, a MASTER_ADDR that does not resolve, a port in
#     use, SLURM variables that disagree: one error line each, no hang.
# Needs root (namespaces) and Debian's slurmctld, slurmd and munge; SKIPPED without them (a
# failure under CI=true). Everything it makes is removed on every exit path.
source "$(dirname "$0")/lib.sh" test_multihost "${1:-./train_gpt2}"
PT=5
need=
[ "$(id -u)" = 0 ] || need="root (for network namespaces)"
for tool in ip unshare mpirun slurmctld slurmd sbatch munged; do
    command -v $tool > /dev/null || need="${need:+$need, }$tool"
done
have_mpi || need="${need:+$need, }$TRAINER built with MPI"
if [ -n "$need" ]; then skip_or_fail test-multihost "$need" "apt-get install iproute2 openmpi-bin libopenmpi-dev slurmctld slurmd munge; run as root"; exit; fi

# ---- the hosts
id=$(( $$ % 200 + 20 ))
NS=(llmc$$a llmc$$b)
ADDR=(10.231.$id.1 10.231.$id.2)
cleanup() {
    for ns in "${NS[@]}"; do ip netns pids "$ns" 2> /dev/null | xargs -r kill -9 2> /dev/null; done
    [ -f "$TMP/munge/pid" ] && kill -9 "$(cat "$TMP/munge/pid")" 2> /dev/null
    for ns in "${NS[@]}"; do ip netns del "$ns" 2> /dev/null; rm -rf "/etc/netns/$ns"; done
    pkill -9 -f "$TMP" 2> /dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
for i in 0 1; do
    ip netns add "${NS[$i]}" && ip -n "${NS[$i]}" link set lo up || { bad "cannot make network namespace ${NS[$i]}"; finish; exit 1; }
    mkdir -p "/etc/netns/${NS[$i]}"  # ip netns exec shows this as the host's /etc/hosts
    printf '127.0.0.1 localhost\n%s node1\n%s node2\n' "${ADDR[0]}" "${ADDR[1]}" > "/etc/netns/${NS[$i]}/hosts"
done
ip link add "${NS[0]}v" type veth peer name "${NS[1]}v" && ip link set "${NS[0]}v" netns "${NS[0]}" && ip link set "${NS[1]}v" netns "${NS[1]}" \
    || { bad "cannot make the veth pair"; finish; exit 1; }
for i in 0 1; do
    ip -n "${NS[$i]}" addr add "${ADDR[$i]}/24" dev "${NS[$i]}v" && ip -n "${NS[$i]}" link set "${NS[$i]}v" up || bad "cannot address ${NS[$i]}"
done
# on N CMD...: CMD on host nodeN (its namespace, its hostname)
on() { local n=$1; shift; ip netns exec "${NS[$((n - 1))]}" unshare --uts sh -c 'hostname "$0"; exec "$@"' "node$n" "$@"; }
# what `ssh HOST COMMAND` is to mpirun's rsh launcher: COMMAND in HOST's namespace
cat > agent <<EOF
#!/bin/sh
host=\$1; shift
case "\$host" in node1) ns=${NS[0]} ;; node2) ns=${NS[1]} ;; *) echo "agent: no host \$host" >&2; exit 255 ;; esac
exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$host; \$*"
EOF
chmod +x agent
printf 'node1 slots=2\nnode2 slots=2\n' > hostfile
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm_rsh_agent=$TMP/agent OMP_NUM_THREADS=1
[ "$(on 2 hostname)" = node2 ] && on 1 getent hosts node2 > /dev/null && ok "hosts node1 (${ADDR[0]}) and node2 (${ADDR[1]})"

# ---- SLURM: munge, slurmctld on node1, a slurmd per node (each its own config dir: PMIx's per-node
# directory must differ, as the /tmp of two real nodes does)
mkdir -p munge slurm/state slurm/log slurm/spool/node1 slurm/spool/node2 slurm/pmix/node1 slurm/pmix/node2
head -c 1024 /dev/urandom > munge/key && chmod 400 munge/key
munged -f -S "$TMP/munge/sock" --key-file="$TMP/munge/key" --log-file="$TMP/munge/log" --pid-file="$TMP/munge/pid" \
    --seed-file="$TMP/munge/seed" || bad "munged did not start"
# no systemd here to ask for cgroup scopes: SLURM 22.05 and newer are told so; 21.08 (Ubuntu
# 22.04's) has no such key and refuses a cgroup.conf that names it
IGNORE_SYSTEMD=
dpkg --compare-versions "$(slurmd -V | grep -o '[0-9][0-9]*\.[0-9][0-9]*' | head -1)" ge 22.05 && IGNORE_SYSTEMD=$'IgnoreSystemd=yes\n'
for n in 1 2; do
    mkdir -p slurm/conf$n
    cat > slurm/conf$n/slurm.conf <<EOF
ClusterName=llmctest
SlurmctldHost=node1(${ADDR[0]})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# cred_expire: a requeued job waits this + 1 s before it may start again (default 120)
AuthInfo=socket=$TMP/munge/sock,cred_expire=10
CredType=cred/munge
StateSaveLocation=$TMP/slurm/state
SlurmdSpoolDir=$TMP/slurm/spool/%n
SlurmctldPidFile=$TMP/slurm/slurmctld.pid
SlurmdPidFile=$TMP/slurm/slurmd.%n.pid
SlurmctldLogFile=$TMP/slurm/log/slurmctld.log
SlurmdLogFile=$TMP/slurm/log/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdTimeout=10
KillWait=5
# job records go 4 s after the job: sbatch --wait then polls every 2 s (its sleeps grow 2, 8, 32 s only
# while below MinJobAge/2: with the default of 300 a job of 12 s returned after 42, the test took 139 s
# instead of 87), so it always finds the record. At 2 a record could go between two polls, and sbatch
# then says "Job N no longer found and exit code not found" and exits 0 (an error that repeats
# passed for a success once, in a fresh Debian 12 root)
MinJobAge=4
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=node1 NodeAddr=${ADDR[0]} CPUs=2 State=UNKNOWN
NodeName=node2 NodeAddr=${ADDR[1]} CPUs=2 State=UNKNOWN
PartitionName=test Nodes=node1,node2 Default=YES MaxTime=INFINITE State=UP
EOF
    printf 'CgroupPlugin=cgroup/v1\n%s' "$IGNORE_SYSTEMD" > slurm/conf$n/cgroup.conf
    echo "PMIxCliTmpDirBase=$TMP/slurm/pmix/node$n" > slurm/conf$n/mpi.conf
done
export SLURM_CONF=$TMP/slurm/conf1/slurm.conf
# slurm.sbatch's repository (its jobs run here, in $TMP); one launch per job (no relaunch of a
# crash: the jobs below that fail must end), but in 4c
export LLMC_ROOT=$ROOT RETRIES=1
start_slurmd() { on "$1" slurmd -f "$TMP/slurm/conf$1/slurm.conf" -N "node$1"; }
# without them every SLURM step below would only wait for nodes that never come: stop here
on 1 slurmctld -f "$SLURM_CONF" && start_slurmd 1 && start_slurmd 2 || { bad "the SLURM daemons did not start"; finish; }
# wait_idle: both nodes idle (after a lost node: its slurmd again, and the node resumed)
wait_idle() {
    for _ in $(seq 100); do
        [ "$(on 1 sinfo -h -o '%t %D' 2> /dev/null)" = "idle 2" ] && return 0
        on 1 scontrol update nodename=node1,node2 state=resume > /dev/null 2>&1
        sleep 0.2
    done
    bad "the SLURM nodes are not idle: $(on 1 sinfo -h 2>&1)"; return 1
}
wait_idle && ok "SLURM: slurmctld on node1, slurmd on node1 and node2 ($(slurmd -V))"
# srun starts OpenMPI's ranks through PMIx: a SLURM built without it (Ubuntu 22.04's 21.08) cannot,
# and the parts that need it are skipped (a failure under CI=true)
SRUN_PMIX=1
if ! on 1 srun --mpi=list 2>&1 | grep -q pmix; then
    SRUN_PMIX=0
    skip_or_fail "test-multihost: srun --mpi=pmix (the recipe under SLURM with MPI, a lost host under SLURM)" \
        "srun's pmix plugin ($(slurmd -V) is built without PMIx)" "a SLURM built with PMIx, as Debian 12's slurm-wlm-basic-plugins is" \
        || bad "srun has no pmix plugin"
fi

# ---- the data and the reference
$PY "$ROOT/dev/bench/make_random_shard.py" train.bin 60000 1 512 > /dev/null
$PY "$ROOT/dev/bench/make_random_shard.py" val.bin 20000 2 512 > /dev/null
# (over the recipes' own flags: -l -u -q -c -h and the rest for a small run)
RUN=(-i "$TMP/train.bin" -j "$TMP/val.bin" -e L2:C64:H4:T64:V512 -b 4 -t 32 -d 512 -v 10 -m 2 -s 0 -x 20 -n 5
     -l 1e-3 -u 2 -q 0.1 -c 0.1 -h 0 -tk none.bin -pt $PT)
"$TRAINER" "${RUN[@]}" -o "$TMP/one" -y 0 > one.out 2>&1 || { bad "the 1-process reference failed"; tail -3 one.out; }
# same_losses WHAT DIR: the run in DIR has the reference's per-step losses (4 ranks against 1: 1e-5)
same_losses() {
    compare_logs one/main.log "$2/main.log" trl=1e-5 tel=1e-5 > cmp.out && ok "$1: $(head -1 cmp.out | sed 's/^ *//')" \
        || { bad "$1: the losses differ from 1 process"; cat cmp.out; }
}

# ---- 1. OpenMPI across the hosts, through the recipe itself
on 1 env HOSTFILE="$TMP/hostfile" TRAINER="$TRAINER" NP=4 PER_NODE=2 bash "$ROOT/scripts/multi_node/mpirun_hostfile.sh" \
    "${RUN[@]}" -o "$TMP/mpi" > mpi.out 2>&1 || { bad "mpirun_hostfile.sh failed"; tail -5 mpi.out; }
grep -q "^trainer .* 4 process(es) (mpirun)" mpi.out && same_losses "mpirun --hostfile, 2 hosts x 2 ranks" mpi
# ranks 2 and 3 ran on node2: their state files exist, their flight ring recorded TCP traffic
[ -f mpi/state_00000020_00003.bin ] || bad "no state file of rank 3 (node2)"
# SIGTERM to the recipe's PID: passed on to mpirun as SIGUSR1, which reaches node2's ranks through
# its daemon there; every rank checkpoints, the script exits 0 (mpirun's own SIGTERM ends the job)
on 1 env HOSTFILE="$TMP/hostfile" TRAINER="$TRAINER" NP=4 PER_NODE=2 bash "$ROOT/scripts/multi_node/mpirun_hostfile.sh" \
    "${RUN[@]}" -x 100000 -n 0 -o "$TMP/mpistop" > mpistop.out 2>&1 &
job=$!
wait_line '^step 2/' mpistop.out 60
kill -TERM "$(pgrep -P $job)"  # the script (`on`, a function, runs in a subshell of its own)
timeout 60 tail --pid=$job -f /dev/null; kill -9 $job 2> /dev/null
wait $job && step=$(stopped_step mpistop.out) && [ -n "$step" ] \
    && [ "$(ls mpistop | grep -c "^state_$(printf %08d "$step")_")" = 4 ] && [ -f "mpistop/DONE_$(printf %08d "$step")" ] \
    && ok "mpirun_hostfile.sh given SIGTERM: the 4 ranks on 2 hosts checkpointed at step $step, exit 0" \
    || { bad "mpirun_hostfile.sh given SIGTERM: no checkpoint of the 4 ranks, or not exit 0"; grep -v '^step' mpistop.out | tail -n 4; }

# ---- 2. SLURM: sbatch the recipe (its #SBATCH lines overridden for these hosts)
SB=(sbatch --wait --nodes=2 --ntasks-per-node=2 --cpus-per-task=1 --gpus-per-node=0)
if [ $SRUN_PMIX = 1 ]; then
    on 1 env TRAINER="$TRAINER" "${SB[@]}" -o "$TMP/slurm_pmix.out" "$ROOT/scripts/multi_node/slurm.sbatch" \
        "${RUN[@]}" -o "$TMP/spmix" > sbatch.out 2>&1 || { bad "sbatch slurm.sbatch (srun --mpi=pmix) failed"; tail -5 slurm_pmix.out; }
    grep -q "^trainer .* 4 process(es) (mpirun)" slurm_pmix.out && same_losses "sbatch, srun --mpi=pmix, 2 nodes x 2 tasks" spmix
fi
# without MPI: the probe takes the trainer's place
"$ROOT/dev/test/launch_probe" "${RUN[@]}" -o "$TMP/probe" > probe1.out 2>&1  # one process, 4 micro-steps: the reference
# probe_ok OUT LAUNCHER WHAT: 4 ranks (2 per node, local 0-1 on each) from LAUNCHER, all with rank 0's
# token (through the bootstrap), reading together the micro-batches of one process
probe_ok() {
    $PY - "$1" probe1.out "$2" <<'EOF' && ok "$3" || bad "$3: the probe's ranks, bootstrap or data are wrong (see $1)"
import re, sys
ranks = {int(m[1]): m for m in re.finditer(r"^probe rank (\d+) of (\d+) local (\d+) host (\S+) launcher (\S+) token (\d+)$", open(sys.argv[1]).read(), re.M)}
assert sorted(ranks) == [0, 1, 2, 3] and {m[2] for m in ranks.values()} == {"4"}, ranks
assert {(m[4], int(m[3])) for m in ranks.values()} == {("node1", 0), ("node1", 1), ("node2", 0), ("node2", 1)}
assert {m[5] for m in ranks.values()} == {sys.argv[3]} and len({m[6] for m in ranks.values()}) == 1 and ranks[0][6] != "0"
def batches(path):  # global micro-batch -> crc of its tokens
    return {int(m[1]): m[2] for m in re.finditer(r"^probe rank \d+ batch (\d+) windows \S+ crc (\w+)$", open(path).read(), re.M)}
four, one = batches(sys.argv[1]), batches(sys.argv[2])
assert sorted(four) == [0, 1, 2, 3] and four == one, (four, one)
EOF
}
on 1 env TRAINER="$ROOT/dev/test/launch_probe" SRUN_MPI=none "${SB[@]}" -o "$TMP/slurm_none.out" \
    "$ROOT/scripts/multi_node/slurm.sbatch" "${RUN[@]}" > sbatch.out 2>&1 || { bad "sbatch with SRUN_MPI=none failed"; tail -5 slurm_none.out; }
probe_ok slurm_none.out slurm "srun without MPI: ranks 0-3 from SLURM_*, local 0-1 on each node, rank 0's token through the TCP bootstrap, the data of one process"
if [ $SRUN_PMIX = 1 ]; then  # slurm.sbatch's default with a build without MPI (as the probe is): srun's ranks
    on 1 env TRAINER="$ROOT/dev/test/launch_probe" "${SB[@]}" -o "$TMP/slurm_pmix_nompi.out" "$ROOT/scripts/multi_node/slurm.sbatch" \
        "${RUN[@]}" > sbatch.out 2>&1 || { bad "sbatch of a build without MPI (srun --mpi=pmix) failed"; tail -5 slurm_pmix_nompi.out; }
    probe_ok slurm_pmix_nompi.out slurm "srun --mpi=pmix, a build without MPI: srun's ranks, the TCP bootstrap, the data of one process"
fi
# llm.c's multi-node scripts: each task is given -pn/-pr/-pg from SLURM_* and meets the others
# through -pi fs (files in a directory both nodes see) or -pi tcp -ps <node1>, without MPI or MASTER_ADDR
cat > llmc_task.sh <<EOF
#!/bin/bash
unset MASTER_ADDR MASTER_PORT
exec "$ROOT/dev/test/launch_probe" ${RUN[*]} -o "$TMP/probe" -pn "\$SLURM_NTASKS" -pr "\$SLURM_PROCID" -pg "\$SLURM_NTASKS_PER_NODE" "\$@"
EOF
printf '#!/bin/bash\nsrun -u --mpi=none "%s" "$@"\n' "$TMP/llmc_task.sh" > llmc_flags.sbatch
chmod +x llmc_task.sh
for init in "-pi fs -pf $TMP/llmc_sync" "-pi tcp -ps ${ADDR[0]}"; do
    on 1 "${SB[@]}" -o "$TMP/llmc_flags.out" "$TMP/llmc_flags.sbatch" $init > sbatch.out 2>&1 \
        || { bad "sbatch of llm.c's flags ($init) failed"; tail -5 llmc_flags.out; }
    probe_ok llmc_flags.out slurm "srun with llm.c's -pn \$SLURM_NTASKS -pr \$SLURM_PROCID -pg \$SLURM_NTASKS_PER_NODE $init: rank 0's token, the data of one process"
done
[ -z "$(ls -A llmc_sync)" ] || bad "-pi fs left files in -pf: $(ls llmc_sync | tr '\n' ' ')"
# the same processes started by hand on each host, with no launcher at all
hand=()
for r in 0 1 2 3; do
    on $((r / 2 + 1)) "$ROOT/dev/test/launch_probe" "${RUN[@]}" -o "$TMP/probe" -pn 4 -pr $r -pg 2 -pi tcp -ps "${ADDR[0]}" > "hand.$r.out" 2>&1 &
    hand+=($!)
done
wait "${hand[@]}"
cat hand.[0-3].out > hand.out
probe_ok hand.out -pn/-pr "by hand on node1 and node2 with -pn 4 -pr 0..3 -pg 2 -pi tcp -ps ${ADDR[0]}: rank 0's token, the data of one process"
# sbatch_out FILE ARGS...: sbatch --wait ... -o FILE ARGS, then FILE on stdout without SLURM's own
# lines; 1 if the job failed (srun's status is its tasks' strongest: 143 for the tasks it ended
# with SIGTERM after the first failed one)
sbatch_out() {
    local out=$1
    shift
    on 1 env "$@" > /dev/null 2>&1
    local rc=$?
    grep -v '^srun: \|^slurmstepd' "$out"
    [ $rc -eq 0 ] || return 1
}
ERROR_LINES=4 expect_error "train_gpt2 under srun without MPI (each rank says so)" "runs several processes only with MPI; use: mpirun -np 4 ./train_gpt2 ..., or under SLURM srun --mpi=pmix" \
    sbatch_out "$TMP/refuse.out" TRAINER="$TRAINER" SRUN_MPI=none "${SB[@]}" -o "$TMP/refuse.out" "$ROOT/scripts/multi_node/slurm.sbatch" "${RUN[@]}"

# ---- 3. a host is lost: 400 steps, node2 killed or frozen once step 8 is printed (a step takes
# about 15 ms: the job must still be running when the test has seen step 8 and stops node2, also
# on a loaded machine; with 40 steps of 7 ms it once finished first)
LOST=("${RUN[@]}" -x 400 -e L2:C128:H4:T64:V512)
# at_step8 OUT: 0 once OUT has the step line of step 8 (within 120 s: make test runs another test
# beside this one), else 1
at_step8() { wait_line "^step 8/400 " "$1" 120; }
# a failed run's output but its step lines (a crash's stack under mpirun or srun is long)
show_output() { grep -v '^step ' "$1" | tail -40; }
"$TRAINER" "${LOST[@]}" -o "$TMP/ref400" > ref400.out 2>&1 || bad "the 400-step reference failed"
# node1's trainer processes
node1_ranks() { for p in $(ip netns pids "${NS[0]}"); do [ "$(readlink "/proc/$p/exe")" = "$TRAINER" ] && echo "$p"; done; }
# "RANK PID" of each of them (the rank from the launcher's environment)
node1_rank_pids() {
    for p in $(node1_ranks); do
        echo "$(tr '\0' '\n' < "/proc/$p/environ" | sed -n 's/^\(OMPI_COMM_WORLD_RANK\|PMIX_RANK\|SLURM_PROCID\)=//p' | head -1) $p"
    done
}
# lose HOW LAUNCH DIR: start the job (LAUNCH: mpi or slurm) into DIR on node1, then at step 8 SIGKILL
# or SIGSTOP (HOW: kill or stop) every process of node2; node1's ranks must be gone within -pt + 30 s,
# each after its line naming the step; then node2's processes are killed and the job must end non-zero.
# One exception, OpenMPI's: its TCP transport ends a rank itself, without returning to the trainer,
# when it finds its connection to a killed rank reset, and says so, naming that rank's PID and the
# lost host; such a rank counts, as long as another rank printed the line naming the step.
lose() {
    local how=$1 launch=$2 dir=$3 job t0 left
    if [ "$launch" = mpi ]; then
        on 1 env HOSTFILE="$TMP/hostfile" TRAINER="$TRAINER" NP=4 PER_NODE=2 timeout -s KILL 120 \
            bash "$ROOT/scripts/multi_node/mpirun_hostfile.sh" "${LOST[@]}" -o "$TMP/$dir" > "$dir.out" 2>&1 &
    else
        on 1 env TRAINER="$TRAINER" timeout -s KILL 120 "${SB[@]}" -o "$TMP/$dir.out" "$ROOT/scripts/multi_node/slurm.sbatch" \
            "${LOST[@]}" -o "$TMP/$dir" > /dev/null 2>&1 &
    fi
    job=$!
    at_step8 "$dir.out" || { bad "$dir: the job did not reach step 8"; tail -3 "$dir.out"; kill -9 $job; return; }
    local pids
    pids=$(node1_rank_pids)
    ip netns pids "${NS[1]}" | xargs -r kill -"${how^^}"
    t0=$SECONDS
    while [ -n "$(node1_ranks)" ] && [ $((SECONDS - t0)) -le $((PT + 40)) ]; do sleep 0.2; done
    left=$(node1_ranks)
    local what
    what="node2 $([ "$how" = kill ] && echo killed || echo frozen) under $([ "$launch" = mpi ] && echo mpirun || echo SLURM)"
    [ -z "$left" ] && [ $((SECONDS - t0)) -le $((PT + 30)) ] && ok "$what: node1's ranks exited $((SECONDS - t0)) s later (-pt $PT)" \
        || bad "$what: node1's ranks still there after $((SECONDS - t0)) s: $left"
    ip netns pids "${NS[1]}" | xargs -r kill -9  # a frozen host is reset; the launcher can finish
    wait $job
    local rc=$?
    [ $rc -ne 0 ] || bad "$what: the job exited 0"
    local r pid ours=0 theirs=""
    for r in 0 1; do
        if grep -q "^\[rank $r\] \(error\|note\): step [0-9]* (.*\(no answer from rank(s) 2, 3\|came while this rank had waited\|before this rank began to wait\|a connection to another rank broke\)" "$dir.out"; then
            ours=$((ours + 1))
            continue
        fi
        pid=$(echo "$pids" | awk -v r=$r '$1 == r {print $2}')
        if [ -n "$pid" ] && grep -A2 "^  Local PID: *$pid\$" "$dir.out" | grep -q "^  Peer host: *node2\$"; then
            theirs="$theirs; rank $r ended by OpenMPI on a reset connection to node2 (its message names PID $pid)"
        else
            bad "$what: rank $r printed no line naming the step and the ranks it waited for"; show_output "$dir.out"
        fi
    done
    [ $ours -ge 1 ] || bad "$what: no rank printed a line naming the step"
    ok "$what: $(grep -m1 '^\[rank [01]\] \(error\|note\)' "$dir.out" | cut -c1-150)$theirs"
}
lose kill mpi lostmk
# 4. resume on the remaining host, one process
on 1 "$TRAINER" "${LOST[@]}" -o "$TMP/lostmk" -y 1 > resume.out 2>&1 || { bad "the resume on node1 failed"; tail -3 resume.out; }
# the first 40 steps (4 ranks then 1 against 1 throughout: their sums differ in the last bits, and
# over hundreds of steps such differences grow past 1e-5)
for d in ref400 lostmk; do awk -F'[: ]' '$2 <= 40' $d/main.log > $d.first40.log; done
compare_logs ref400.first40.log lostmk.first40.log trl=1e-5 tel=1e-5 > cmp.out \
    && ok "node2 lost: -y 1 on node1 alone $(grep -o 'resumed from checkpoint [0-9]*' resume.out), the losses of an uninterrupted run ($(head -1 cmp.out | sed 's/^ *//'))" \
    || { bad "node2 lost: the resumed losses differ"; cat cmp.out; }
lose stop mpi lostms
start_slurmd 2 && wait_idle
if [ $SRUN_PMIX = 1 ]; then
    lose kill slurm lostsk
    start_slurmd 2 && wait_idle
    lose stop slurm lostss
    start_slurmd 2 && wait_idle
fi
# 4b. the time limit near under SLURM
# near_time_limit DIR [VAR=VALUE...]: slurm.sbatch's job (VARs in its environment) into DIR, and at
# step 8 what --signal=B:USR1@300 does 5 minutes before the time limit: USR1 to the batch script
# alone; then waits for sbatch --wait. Sets jobid, what and rc (sbatch's exit status).
near_time_limit() {
    local dir=$1 job
    shift
    on 1 env TRAINER="$TRAINER" "$@" timeout -s KILL 180 "${SB[@]}" -o "$TMP/$dir.out" "$ROOT/scripts/multi_node/slurm.sbatch" \
        "${LOST[@]}" -o "$TMP/$dir" > "sbatch_$dir.out" 2>&1 &
    job=$!
    at_step8 "$dir.out" || { bad "$dir: the job did not reach step 8"; show_output "$dir.out"; ls -l --full-time "$TMP" | grep vader_segment; }
    jobid=$(grep -o 'Submitted batch job [0-9]*' "sbatch_$dir.out" | grep -o '[0-9]*$')
    what="USR1 to the batch script of job $jobid at step $(grep -o '^step [0-9]*' "$dir.out" | sed -n '$p' | cut -d' ' -f2)"
    on 1 scancel --signal=USR1 --batch "$jobid" || bad "scancel --signal=USR1 --batch $jobid failed"
    wait $job && rc=0 || rc=$?
}
if [ $SRUN_PMIX = 1 ]; then
    # the tasks checkpoint, the job is requeued, its second start resumes with -y 1 and finishes
    t0=$SECONDS
    near_time_limit requeue
    first=$(grep -m1 -o 'resumed from checkpoint [0-9]*' requeue.out)
    [ $rc = 0 ] && grep -q "^slurm.sbatch: requeueing job $jobid (start 2)" requeue.out && [ -n "$first" ] \
        && grep -q "^step 400/400 " requeue.out && [ -f requeue/model_00000400.bin ] && [ "$(grep -c '^trainer ' requeue.out)" = 2 ] \
        && ok "$what: requeued, the second start $first and finished (both starts' output in one file), $((SECONDS - t0)) s in all" \
        || { bad "$what: not checkpointed, requeued, resumed and finished (sbatch exit $rc)"; show_output requeue.out; }
    for d in ref400 requeue; do awk -F'[: ]' '$2 <= 40' $d/main.log > $d.first40.log; done
    compare_logs ref400.first40.log requeue.first40.log trl=1e-5 tel=1e-5 > cmp.out \
        && ok "$what: the requeued job's losses are an uninterrupted run's ($(head -1 cmp.out | sed 's/^ *//'))" \
        || { bad "$what: the requeued job's losses differ"; cat cmp.out; }
    # REQUEUE=0: the run checkpoints and the job ends
    near_time_limit norequeue REQUEUE=0
    [ $rc = 0 ] && ! grep -q "requeueing" norequeue.out && ! grep -q "^step 400/400 " norequeue.out \
        && ls norequeue/DONE_* > /dev/null 2>&1 && [ "$(grep -c '^trainer ' norequeue.out)" = 1 ] \
        && ok "REQUEUE=0, $what: the run checkpointed at $(ls norequeue | grep -o 'DONE_[0-9]*' | tail -1) and the job ended (no restart)" \
        || { bad "REQUEUE=0, $what: the job did not just checkpoint and end (sbatch exit $rc)"; show_output norequeue.out; }
fi

# 4c. a crash under SLURM: slurm.sbatch relaunches the trainer within the allocation by
# run_gpt2_124M.sh's rule (scripts/relaunch_lib.sh), here with its stand-in (dev/test/relaunch_stub.sh:
# at its n-th call it writes the checkpoint marker of line n and exits with its code), 1 task
# stub_job NAME PLAN...: the job, its output in NAME.out; sets rc (sbatch's exit status)
stub_job() {
    local name=$1
    shift
    printf '%s\n' "$@" > "$name.plan"
    on 1 env TRAINER="$ROOT/dev/test/relaunch_stub.sh" SRUN_MPI=none RETRIES=5 RETRY_WAIT=${RETRY_WAIT:-0} STUB_PLAN="$TMP/$name.plan" \
        STUB_CALLS="$TMP/$name.calls" timeout -s KILL 90 sbatch --wait --nodes=1 --ntasks-per-node=1 --cpus-per-task=1 \
        --gpus-per-node=0 -o "$TMP/$name.out" "$ROOT/scripts/multi_node/slurm.sbatch" -o "$TMP/$name" > "sbatch_$name.out" 2>&1 && rc=0 || rc=$?
}
stub_job crash "1000 1" "2000 0"
[ $rc = 0 ] && [ "$(cat crash.calls)" = 2 ] && grep -q "^slurm.sbatch: the trainer exited with 1 (attempt 1 of 5); relaunching in 0 s" crash.out \
    && ok "slurm.sbatch: a crash after checkpoint 1000 is relaunched within the job, and the run ends" \
    || { bad "slurm.sbatch: the crash was not relaunched (sbatch exit $rc)"; cat crash.out; }
stub_job crashes "1000 1" "- 1" "- 1" "- 0"
line=$(grep -m1 "twice in a row" crashes.out)
[ $rc != 0 ] && [ "$(cat crashes.calls)" = 3 ] && grep -q "without a new checkpoint (newest: checkpoint 1000; attempt 3)" <<< "$line" \
    && ok "slurm.sbatch: an error that repeats ends the job: ${line:0:120}" || { bad "slurm.sbatch: an error that repeats (sbatch exit $rc)"; cat crashes.out sbatch_crashes.out; }
# a crash as the time limit nears: USR1 to the batch script while it waits to relaunch; requeued
# where this start wrote a checkpoint (the second start finishes), not where it wrote none
# crash_at_limit NAME PLAN...: the job in the background, USR1 once it waits; sets rc
crash_at_limit() {
    local name=$1 job jobid
    ( RETRY_WAIT=10 stub_job "$@"; exit $rc ) &
    job=$!
    wait_line "relaunching in 10 s" "$name.out" 60
    jobid=$(grep -o 'Submitted batch job [0-9]*' "sbatch_$name.out" | grep -o '[0-9]*$')
    on 1 scancel --signal=USR1 --batch "$jobid" || bad "scancel --signal=USR1 --batch '$jobid' failed"
    wait $job && rc=0 || rc=$?
}
crash_at_limit limitcrash "1000 1" "2000 0"
line=$(grep -m1 "as the time limit neared" limitcrash.out)
[ $rc = 0 ] && [ "$(cat limitcrash.calls)" = 2 ] && grep -q "^slurm.sbatch: requeueing job" limitcrash.out \
    && grep -q "is requeued instead of relaunched" <<< "$line" \
    && ok "slurm.sbatch: a crash as the time limit nears, after checkpoint 1000: requeued, the second start finishes (${line:14:100})" \
    || { bad "slurm.sbatch: a crash as the time limit nears was not requeued (sbatch exit $rc)"; cat limitcrash.out; }
crash_at_limit limitstall "- 1" "- 0"
line=$(grep -m1 "as the time limit neared" limitstall.out)
[ $rc != 0 ] && [ "$(cat limitstall.calls)" = 1 ] && ! grep -q "requeueing" limitstall.out && grep -q "wrote no checkpoint" <<< "$line" \
    && ok "slurm.sbatch: a crash as the time limit nears, no checkpoint in this start: the job ends (${line:14:100})" \
    || { bad "slurm.sbatch: a crash at the time limit without a checkpoint (sbatch exit $rc)"; cat limitstall.out; }

# ---- 5. bad input: one line each
printf 'node1 slots=2\nnode3 slots=2\n' > badhosts
expect_error "a hostfile naming an unknown host" "hostfile '$TMP/badhosts' names 'node3', which does not resolve" \
    on 1 env HOSTFILE="$TMP/badhosts" TRAINER="$TRAINER" NP=4 PER_NODE=2 bash "$ROOT/scripts/multi_node/mpirun_hostfile.sh" "${RUN[@]}" -o "$TMP/x"
PROBE=(TRAINER="$ROOT/dev/test/launch_probe" SRUN_MPI=none "${SB[@]}")
expect_error "slurm.sbatch with REQUEUE=maybe" "slurm.sbatch: REQUEUE='maybe': expected 1" \
    sbatch_out "$TMP/requeue_bad.out" REQUEUE=maybe "${PROBE[@]}" -o "$TMP/requeue_bad.out" "$ROOT/scripts/multi_node/slurm.sbatch" "${RUN[@]}"
ERROR_LINES=4 expect_error "MASTER_ADDR that does not resolve (each rank says so)" "cannot resolve rank 0's host 'nosuchhost.invalid' (MASTER_ADDR or -ps)" \
    sbatch_out "$TMP/addr.out" MASTER_ADDR=nosuchhost.invalid "${PROBE[@]}" -o "$TMP/addr.out" "$ROOT/scripts/multi_node/slurm.sbatch" "${RUN[@]}"
# the port taken on node1 (once the previous job's ranks have let it go; a connection of theirs
# left in TIME_WAIT does not count, as it does not for the trainer's own SO_REUSEADDR socket)
on 1 $PY - "$TMP/port_taken" <<'EOF' &
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
for _ in range(200):
    try:
        s.bind(("", 29501))
        break
    except OSError:
        time.sleep(0.1)
s.listen()
open(sys.argv[1], "w").close()
time.sleep(60)
EOF
for _ in $(seq 300); do [ -f "$TMP/port_taken" ] && break; sleep 0.1; done
[ -f "$TMP/port_taken" ] || bad "port 29501 on node1 stayed in use for 30 s"
ERROR_LINES=4 expect_error "the bootstrap port in use (each rank says so)" "rank 0 cannot listen on port 29501" \
    sbatch_out "$TMP/port.out" "${PROBE[@]}" -o "$TMP/port.out" "$ROOT/scripts/multi_node/slurm.sbatch" "${RUN[@]}"
kill %% 2> /dev/null
expect_error "SLURM_PROCID 4 of SLURM_NTASKS 4" "SLURM_PROCID=4 and SLURM_NTASKS=4: the world size must be at least 1 and the rank below it; srun sets them" \
    env SLURM_PROCID=4 SLURM_NTASKS=4 "$TRAINER" "${RUN[@]}" -o "$TMP/x"
finish
