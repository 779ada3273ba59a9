#!/usr/bin/env bash
# The fresh-machine check of the README's quick start, run by hand as root on a host
# with debootstrap and network access to the distribution's mirror and PyPI; not part of make
# test (it downloads about 1 GB and takes 30-40 minutes on 2 cores).
#
#   bash dev/test/fresh_machine.sh [suite]        suite: bookworm (default), jammy or noble
#
# 1. A new root: debootstrap --variant=minbase <suite>, plus git; entered with chroot, /proc, /sys
#    and /dev bound from the host; no ../shared next to the clone and no CUDA toolkit.
# 2. This repository's HEAD commit (commit first: uncommitted changes are not checked) cloned into
#    /root/llmc and, for an unprivileged user without sudo, /home/fresh/llmc.
# 3. As that user, the first command must stop before installing anything and print the one
#    command to run as root.
# 4. The two commands of the README's "Quick start" block, exactly as written there, with a clean
#    environment (no CI variable, so what cannot run here is SKIPPED, not failed): the first as
#    that user once given passwordless sudo (sudo is installed for it), the second as root.
#    MAIN_ARGS="-x 10" appends flags to the first command for a shorter check.
# 5. Run again, each must install nothing (scripts/test.sh with one quick target).
# Expected: both commands exit 0; the main job prints its summary and leaves its model; make test
# passes, no test is skipped for want of MPI (the first command builds train_gpt2 before the second
# installs OpenMPI: make must rebuild it), and the only SKIPPED lines are those for what a fresh machine lacks: the shared data
# folder (the book corpus and HellaSwag: test-tokenizer's and test-data's parts, test-books-smoke)
# and nvcc (test-cuda-build, test-cuda-host, test-plan's train_gpt2cu part), and on jammy srun's
# PMIx plugin (test-multihost's srun --mpi=pmix parts). Any other skip fails the check.
# KEEP=1 leaves the root (FRESH_ROOT, default a new /var/tmp/fresh_machine.XXXXXX) for inspection;
# the logs stay in $FRESH_ROOT.logs.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" --tools   # ROOT: this repository
cd "$ROOT"
SUITE="${1:-bookworm}"
case "$SUITE" in
    bookworm) MIRROR=http://deb.debian.org/debian; COMPONENTS=main ;;
    jammy|noble) MIRROR=http://archive.ubuntu.com/ubuntu; COMPONENTS=main,universe ;;
    *) echo "error: suite '$SUITE': use bookworm, jammy or noble" >&2; exit 1 ;;
esac
[ "$(id -u)" = 0 ] || { echo "error: run as root (debootstrap, chroot and mount need it)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "error: debootstrap is missing: apt-get install debootstrap" >&2; exit 1; }
EXPECTED_SKIPS="test-books-smoke
test-cuda-build
test-cuda-host
test-data: books.sh, hellaswag.sh
test-plan: train_gpt2cu without a GPU
test-tokenizer: books_corpus, hellaswag"
# Ubuntu 22.04's Slurm 21.08 has no PMIx plugin for srun
[ "$SUITE" = jammy ] && EXPECTED_SKIPS=$(printf '%s\n%s\n' "$EXPECTED_SKIPS" \
    "test-multihost: srun --mpi=pmix (the recipe under SLURM with MPI, a lost host under SLURM)" | sort)
# this machine's debootstrap may predate the suite: Ubuntu's releases share one script
SCRIPT=/usr/share/debootstrap/scripts/$SUITE
[ -e "$SCRIPT" ] || SCRIPT=/usr/share/debootstrap/scripts/gutsy

CHROOT="${FRESH_ROOT:-$(mktemp -d /var/tmp/fresh_machine.XXXXXX)}"
LOGS="$CHROOT.logs"
mkdir -p "$CHROOT" "$LOGS"
chmod 755 "$CHROOT"  # the new root's / (mktemp -d makes it 0700: the unprivileged user could not run a shell)
fail=0
bad() { echo "FAIL: $*"; fail=1; }
note() { echo "$*" | tee -a "$LOGS/summary.txt"; }
mounts() { findmnt -rn -o TARGET | grep -e "^$CHROOT/" -e "^$CHROOT\$" | sort -r || true; }
cleanup() {
    local m
    for m in $(mounts); do umount -l "$m" 2>/dev/null || true; done
    if [ "${KEEP:-0}" != 1 ] && [ -z "$(mounts)" ]; then rm -rf --one-file-system "$CHROOT"; fi
}
trap cleanup EXIT
# run_in USER LOG COMMAND: a login shell in the chroot with a clean environment; the exit status
# and the wall time go to the log's last lines
run_in() {
    local user="$1" log="$2" cmd="$3" home=/root t0 rc
    [ "$user" = root ] || home="/home/$user"
    t0=$(date +%s)
    set +e
    chroot "$CHROOT" /usr/bin/env -i HOME="$home" TERM=dumb LANG=C.UTF-8 \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        /usr/sbin/runuser -u "$user" -- /bin/bash -c "cd ~/llmc && $cmd" > "$LOGS/$log" 2>&1
    rc=$?
    set -e
    echo "exit $rc after $(( $(date +%s) - t0 )) s" >> "$LOGS/$log"
    return $rc
}
packages() { chroot "$CHROOT" dpkg-query -W -f='${Status}\n' | grep -c ' installed$'; }

# ---- 1. the root
t0=$(date +%s)
debootstrap --variant=minbase --components="$COMPONENTS" --include=git,ca-certificates "$SUITE" "$CHROOT" "$MIRROR" "$SCRIPT" \
    > "$LOGS/debootstrap.log" 2>&1 || { tail "$LOGS/debootstrap.log"; echo "error: debootstrap failed" >&2; exit 1; }
cp /etc/resolv.conf "$CHROOT/etc/resolv.conf"
# /etc/hosts as an installed system has it (debootstrap writes none): localhost, and the host name
# that sudo looks up
printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' "$(hostname)" > "$CHROOT/etc/hosts"
# the host's own certificate authorities (a TLS-intercepting proxy on a build machine): what the
# host's network needs, not part of what a fresh machine needs for the commands under test
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
    cp /usr/local/share/ca-certificates/*.crt "$CHROOT/usr/local/share/ca-certificates/"
    chroot "$CHROOT" update-ca-certificates > /dev/null 2>&1
fi
# the root a mount point of its own, as on a real machine (ip netns, which test-multihost uses,
# makes / a slave mount and fails where / is a plain folder of the host's)
mount --bind "$CHROOT" "$CHROOT"
mount -t proc proc "$CHROOT/proc"
for d in sys dev; do mount --rbind "/$d" "$CHROOT/$d"; mount --make-rslave "$CHROOT/$d"; done
note "fresh_machine: $SUITE minbase + git in $CHROOT ($(( $(date +%s) - t0 )) s, $(packages) packages); host load $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- 2. the clone, and the README's two commands
git clone -q "$ROOT" "$CHROOT/root/llmc"
git -C "$CHROOT/root/llmc" checkout -q "$(git rev-parse HEAD)"
note "commit $(git rev-parse --short HEAD)"
mapfile -t CMDS < <(awk '/^## Quick start/ { q = 1 } q && /^```bash/ { b = 1; next } b && /^```/ { exit } b' README.md | sed 's/ *#.*$//')
[ ${#CMDS[@]} -eq 2 ] || { echo "error: expected 2 commands in README's Quick start block, found ${#CMDS[@]}" >&2; exit 1; }
note "README: '${CMDS[0]}' and '${CMDS[1]}'"

# ---- 3. an unprivileged user without sudo: told the one command, nothing installed
chroot "$CHROOT" useradd -m fresh
git clone -q "$ROOT" "$CHROOT/home/fresh/llmc"
chroot "$CHROOT" chown -R fresh: /home/fresh/llmc
before=$(packages)
if run_in fresh user.log "${CMDS[0]}"; then bad "as a user without sudo, '${CMDS[0]}' did not stop"; fi
grep -q "^  apt-get update && apt-get install" "$LOGS/user.log" || bad "as a user: no command to run printed ($(tail -3 "$LOGS/user.log"))"
[ "$(packages)" = "$before" ] || bad "as a user: packages were installed"
note "as a user without sudo: $(grep -A1 'needs root' "$LOGS/user.log" | tail -1 | cut -c1-110)..."

# ---- 4. the same user with sudo (passwordless): the main job installs through sudo and trains
chroot "$CHROOT" /usr/bin/env DEBIAN_FRONTEND=noninteractive apt-get install -y -q sudo > "$LOGS/sudo.log" 2>&1
echo "fresh ALL=(ALL) NOPASSWD: ALL" > "$CHROOT/etc/sudoers.d/fresh"
before=$(packages)
run_in fresh main.log "${CMDS[0]} ${MAIN_ARGS:-}" || bad "'${CMDS[0]} ${MAIN_ARGS:-}' failed: $(tail -3 "$LOGS/main.log")"
after=$(packages)
model=$(grep -o '^  model .*' "$LOGS/main.log" | awk '{ print $2 }')
[ -n "$model" ] && [ -f "$CHROOT/home/fresh/llmc/$model" ] || bad "the main job's summary names no model file that exists ('$model')"
note "main job (a user with sudo): $(tail -1 "$LOGS/main.log"); installed $((after - before)) packages: $(grep -o 'setup: installing .*' "$LOGS/main.log" | head -1 | cut -c19-)"
note "  $(grep '^quickstart: done' "$LOGS/main.log" || echo 'no summary')"
note "  $(grep '^step ' "$LOGS/main.log" | tail -1)"

# ---- 5. as root: the tests
before=$after
run_in root test.log "${CMDS[1]}" || bad "'${CMDS[1]}' failed: $(grep -E 'FAIL|Error' "$LOGS/test.log" | head -5)"
after=$(packages)
note "tests: $(tail -1 "$LOGS/test.log"); installed $((after - before)) more packages; $(grep 'make test took' "$LOGS/test.log" || echo 'make test did not finish')"
note "  pip: $(grep -o 'setup: installing .* (pip)' "$LOGS/test.log" || echo nothing)"
skips=$(grep -o '^[^ ].*: SKIPPED' "$LOGS/test.log" | sed 's/: SKIPPED$//' | sort || true)
# the first command builds train_gpt2 before the second installs OpenMPI; the build must
# follow (feature stamps), so no test may skip for want of MPI
mpi_skips=$(grep 'SKIPPED (missing: MPI' "$LOGS/test.log" | cut -d: -f1 | tr '\n' ' ' || true)
[ -z "$mpi_skips" ] && note "  no MPI test skipped (train_gpt2, built before OpenMPI was installed, was rebuilt with it)" \
    || bad "tests skipped for want of MPI after the second command installed it: $mpi_skips"
[ "$skips" = "$EXPECTED_SKIPS" ] || bad "SKIPPED tests differ from the expected set: $(diff <(echo "$EXPECTED_SKIPS") <(echo "$skips") | grep '^[<>]' | tr '\n' ' ')"
note "  skipped: $(echo "$skips" | tr '\n' ';')"

# ---- 6. run again: nothing installed, started at once
run_in fresh again_main.log "${CMDS[0]} -x 1" || bad "rerun of the main job failed"
run_in root again_test.log "${CMDS[1]} test-loader" || bad "rerun of the tests failed"
for l in again_main.log again_test.log; do grep -q "setup: installing" "$LOGS/$l" && bad "$l: installed something again"; done
note "run again: nothing installed; main job -x 1 $(tail -1 "$LOGS/again_main.log"), test-loader $(tail -1 "$LOGS/again_test.log")"

[ $fail -eq 0 ] && note "fresh_machine ($SUITE): passed; logs in $LOGS" || { note "fresh_machine ($SUITE): FAILED; logs in $LOGS"; exit 1; }
