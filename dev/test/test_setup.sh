#!/usr/bin/env bash
# scripts/setup_lib.sh, what the README's two commands install with, against stand-ins for apt-get,
# apt-cache, dpkg-query, sudo and pip (nothing is installed on this machine), on three archives:
# Debian 12's (every package), Ubuntu 22.04's (no libclang-rt-dev, python3-torch 1.8.1) and Ubuntu
# 24.04's (no python3-torch):
#  - need_packages: one apt-get update, then one install of the missing packages; an optional
#    package (?PKG) only where the archive has it, decided after the update (a fresh machine has
#    no package lists), and said when left out; run again, no apt-get call at all; DRY_RUN=1
#    installs nothing; without root or sudo, nothing is installed and the one command printed
#    installs the same packages (an optional one apt cannot know yet in a clause that may fail);
#    where nothing can be installed (no apt-get; no root) but the machine has what the command
#    needs (--have): one line, and on; without it: what to install, and a stop; have_build_tools;
#  - need_torch: nothing where PyTorch 1.13+ imports; the archive's python3-torch where it is 1.13
#    or newer and root can install it; else pip with PyTorch's CPU index (--user without root), and
#    PyPI's torch where that index fails (a torch older than 1.13 does not count).
source "$(dirname "$0")/lib.sh" test_setup
FAKE=$TMP/fake
mkdir -p "$FAKE/bin" "$FAKE/site"
cat > "$FAKE/bin/dpkg-query" <<'EOF'
#!/bin/sh
for pkg; do :; done
grep -qx "$pkg" "$FAKE/installed" && printf 'install ok installed' || exit 1
EOF
# apt's view of the archive: none before the first update, the whole one after it
cat > "$FAKE/bin/apt-cache" <<'EOF'
#!/bin/sh
[ "$1" = policy ] || exit 1
[ -f "$FAKE/updated" ] || exit 0
v=$(awk -v p="$2" '$1 == p { print $2 }' "$FAKE/archive")
[ -n "$v" ] || exit 0
printf '%s:\n  Installed: (none)\n  Candidate: %s\n  Version table:\n' "$2" "$v"
# a long table after it, as apt's can be, written line by line: a reader that stops at the
# candidate line leaves this process to die of SIGPIPE (status 141 under pipefail)
i=0; while [ $i -lt 3000 ]; do printf '     %s 500\n' "$i"; i=$((i + 1)); done
EOF
cat > "$FAKE/bin/apt-get" <<'EOF'
#!/bin/sh
echo "apt-get $*" >> "$FAKE/apt.log"
[ "$1" = update ] && { touch "$FAKE/updated"; exit 0; }
for p; do
    case "$p" in install|-*) continue ;; esac
    v=$(awk -v p="$p" '$1 == p { print $2 }' "$FAKE/archive")
    [ -n "$v" ] || { echo "E: Unable to locate package $p"; exit 100; }
    echo "$p" >> "$FAKE/installed"
    [ "$p" = python3-torch ] && mkdir -p "$FAKE/site/torch" && echo "__version__ = '$v'" > "$FAKE/site/torch/__init__.py"
done
exit 0
EOF
# a user without root (FAKE_UID) and without sudo
printf '#!/bin/sh\n[ "$1" = -u ] && [ -n "$FAKE_UID" ] && { echo "$FAKE_UID"; exit 0; }\nexec /usr/bin/id "$@"\n' > "$FAKE/bin/id"
printf '#!/bin/sh\nexit 1\n' > "$FAKE/bin/sudo"
# the Python: the real one, seeing the fake torch; pip logs and "installs" torch 2.5.1+cpu
cat > "$FAKE/bin/py" <<'EOF'
#!/bin/sh
if [ "$1" = -m ] && [ "$2" = pip ]; then
    if [ "$4" = --help ]; then  # an externally managed Python's pip (FAKE/pep668) knows the flag, early in a long help
        [ -f "$FAKE/pep668" ] && echo "  --break-system-packages"
        i=0; while [ $i -lt 3000 ]; do echo "  --option-$i"; i=$((i + 1)); done
        exit 0
    fi
    echo "pip $*" >> "$FAKE/pip.log"
    case " $* " in *" --index-url "*) [ -f "$FAKE/no_cpu_index" ] && { echo "ERROR: No matching distribution found for torch"; exit 1; } ;; esac
    case " $* " in *" torch "*) mkdir -p "$FAKE/site/torch"; echo "__version__ = '2.5.1+cpu'" > "$FAKE/site/torch/__init__.py" ;; esac
    exit 0
fi
PYTHONPATH="$FAKE/site" exec "$PY_REAL" "$@"
EOF
chmod +x "$FAKE/bin/"*
export FAKE PY_REAL=$PY PATH="$FAKE/bin:$PATH"

COMMON="a-tool 1.0
b-lib 2.0
clang 1:14.0"
# machine ARCHIVE [INSTALLED...]: a fresh machine (no package lists) with that archive
machine() {
    rm -f "$FAKE/updated" "$FAKE/apt.log" "$FAKE/pip.log"
    mkdir -p "$FAKE/site/torch"  # hides this machine's own torch
    echo "raise ImportError('no torch here')" > "$FAKE/site/torch/__init__.py"
    printf '%s\n' "$COMMON" "$1" > "$FAKE/archive"
    shift
    printf '%s\n' "$@" > "$FAKE/installed"
}
# as scripts/test.sh and quickstart.sh run it: set -euo pipefail
setup() { (set -euo pipefail; source "$ROOT/scripts/setup_lib.sh" && "$@") > out.txt 2>&1; }
apt_calls() { cat "$FAKE/apt.log" 2> /dev/null | tr '\n' ';'; }
check() { if [ "$2" = "$3" ]; then ok "$1"; else bad "$1: got '$2', want '$3'"; cat out.txt; fi; }

WANT="apt-get update -q;apt-get install -y -q --no-install-recommends a-tool b-lib clang"
machine "libclang-rt-dev 1:14.0"
setup need_packages a-tool b-lib clang '?libclang-rt-dev'
check "Debian 12, fresh: one update, one install, the optional package with the rest" "$(apt_calls)" "$WANT libclang-rt-dev;"
rm -f "$FAKE/apt.log"
setup need_packages a-tool b-lib clang '?libclang-rt-dev'
check "Debian 12, run again: no apt-get call" "$(apt_calls)" ""

machine "python3-torch 1.8.1"
setup need_packages a-tool b-lib clang '?libclang-rt-dev'
check "Ubuntu 22.04, fresh: installed without the optional package" "$(apt_calls)" "$WANT;"
grep -q "^setup: libclang-rt-dev is not in this distribution's archive; going on without it$" out.txt \
    && ok "Ubuntu 22.04: the optional package left out is named" || { bad "no line naming the package left out"; cat out.txt; }
rm -f "$FAKE/apt.log"
setup need_packages a-tool b-lib clang '?libclang-rt-dev'
check "Ubuntu 22.04, run again: no apt-get call" "$(apt_calls)" ""

machine ""
DRY_RUN=1 setup need_packages a-tool b-lib
check "DRY_RUN=1: no apt-get call" "$(apt_calls)" ""
grep -q "^setup: would install a-tool b-lib$" out.txt && ok "DRY_RUN=1: says what it would install" || { bad "DRY_RUN=1 output"; cat out.txt; }

# without root or sudo: the printed command, run by root, installs what the setup needs
machine "libclang-rt-dev 1:14.0"
FAKE_UID=1000 setup need_packages a-tool b-lib '?libclang-rt-dev' && bad "without root or sudo: need_packages did not stop"
check "without root or sudo: no apt-get call" "$(apt_calls)" ""
line=$(sed -n 's/^  \(apt-get update && .*\)/\1/p' out.txt)
bash -c "$line" > /dev/null
check "without root or sudo: the printed command installs the packages, the optional one too" \
    "$(tr '\n' ' ' < "$FAKE/installed")" " a-tool b-lib libclang-rt-dev "
machine ""
bash -c "$line" > /dev/null
check "the same command where the archive lacks the optional package: still succeeds" "$(tr '\n' ' ' < "$FAKE/installed")" " a-tool b-lib "

# where nothing can be installed but the machine has what the command needs (--have): one line, on
mkdir -p "$FAKE/noapt"  # a PATH without apt-get and dpkg-query: another distribution
PATH="$FAKE/noapt" setup need_packages --have true a-tool \
    && grep -qx "setup: no apt-get here (not Debian or Ubuntu), and this machine has what the command needs; going on" out.txt \
    && ok "no apt-get, the tools there (--have): goes on, saying so" || { bad "no apt-get, the tools there: stopped"; cat out.txt; }
PATH="$FAKE/noapt" setup need_packages --have false a-tool && bad "no apt-get, the tools missing: did not stop"
grep -q "^setup: no apt-get here (not Debian or Ubuntu); install the equivalents of: a-tool (a C compiler" out.txt \
    && ok "no apt-get, the tools missing: stops, naming what to install" || { bad "no apt-get, the tools missing: no line naming them"; cat out.txt; }
machine ""
FAKE_UID=1000 setup need_packages --have true a-tool b-lib || bad "without root, the tools there (--have): stopped"
check "without root, the tools there: no apt-get call" "$(apt_calls)" ""
grep -q "^setup: a-tool b-lib not installed and no root to install them, but this machine has what the command needs; going on (to install them, as root: apt-get update && apt-get install -y -q --no-install-recommends a-tool b-lib)$" out.txt \
    && ok "without root, the tools there: goes on, with the command that would install them" || { bad "without root, the tools there: no such line"; cat out.txt; }
# have_build_tools: this machine's compiler, make, xz and PCRE2; without PCRE2's pkg-config file, no
setup have_build_tools && ok "have_build_tools: this machine has them" || bad "have_build_tools: not found on this machine"
PKG_CONFIG_LIBDIR=$FAKE/noapt PKG_CONFIG_PATH= setup have_build_tools && bad "have_build_tools: PCRE2 found where pkg-config has no file"

# need_torch
machine "python3-torch 1.13.1+dfsg-4"
touch "$FAKE/updated"  # the lists of need_packages' update, which runs first
setup need_torch "$FAKE/bin/py"
check "Debian 12: python3-torch from the archive" "$(apt_calls)/$(cat "$FAKE/pip.log" 2> /dev/null)" \
    "apt-get update -q;apt-get install -y -q --no-install-recommends python3-torch;/"
rm -f "$FAKE/apt.log"
setup need_torch "$FAKE/bin/py"
check "Debian 12, run again: nothing" "$(apt_calls)$(cat "$FAKE/pip.log" 2> /dev/null)" ""
CPU_WHEEL="pip -m pip install -q --index-url https://download.pytorch.org/whl/cpu torch"
for archive in "python3-torch 1.8.1-4" ""; do
    machine "$archive"
    touch "$FAKE/updated"  # the lists of an earlier install
    setup need_torch "$FAKE/bin/py"
    check "archive '${archive:-no python3-torch}': PyTorch's CPU wheel, no apt-get" \
        "$(apt_calls)/$(tr -s ' ' < "$FAKE/pip.log" 2> /dev/null | sed 's/ *--user//')" "/$CPU_WHEEL"
done
machine ""
touch "$FAKE/updated" "$FAKE/no_cpu_index"
setup need_torch "$FAKE/bin/py"
check "PyTorch's index unreachable: PyPI's torch after it" "$(tr '\n' ';' < "$FAKE/pip.log" 2> /dev/null)" "$CPU_WHEEL;pip -m pip install -q torch;"
grep -q "^setup: PyTorch's index (download.pytorch.org) did not serve torch; installing PyPI's torch instead" out.txt \
    && ok "PyTorch's index unreachable: said so" || { bad "no line saying PyTorch's index failed"; cat out.txt; }
rm -f "$FAKE/no_cpu_index"
machine ""
touch "$FAKE/updated" "$FAKE/pep668"
setup need_pypi "$FAKE/bin/py" "import tiktoken_stand_in_that_is_missing" tiktoken
grep -q -- "--break-system-packages tiktoken" "$FAKE/pip.log" 2> /dev/null && ok "an externally managed Python: pip gets --break-system-packages" \
    || bad "an externally managed Python: no --break-system-packages ($(cat "$FAKE/pip.log" 2> /dev/null))"
rm -f "$FAKE/pep668"
machine "python3-torch 1.13.1+dfsg-4"
touch "$FAKE/updated"
FAKE_UID=1000 setup need_torch "$FAKE/bin/py"
check "without root, the archive's python3-torch 1.13: PyTorch's CPU wheel for the user, no apt-get" \
    "$(apt_calls)/$(tr -s ' ' < "$FAKE/pip.log" 2> /dev/null)" "/${CPU_WHEEL/-q/-q --user}"
machine ""
echo "__version__ = '1.8.1'" > "$FAKE/site/torch/__init__.py"
touch "$FAKE/updated"
setup need_torch "$FAKE/bin/py"
grep -q "download.pytorch.org/whl/cpu torch" "$FAKE/pip.log" 2> /dev/null && ok "an installed torch 1.8.1 does not count" \
    || bad "torch 1.8.1 was taken for 1.13+"
finish
