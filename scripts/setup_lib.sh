# Shared by scripts/quickstart.sh and scripts/test.sh (sourced, not run): install what a command
# needs, once. Run again, nothing is installed and nothing is asked.
#   need_packages [--have CMD] PKG...   Debian/Ubuntu packages: the missing ones are installed
#                                with apt-get, as root or through sudo. ?PKG: only where the
#                                distribution's archive has PKG. Where they cannot be installed
#                                (no apt-get: another distribution; no root and no sudo) and CMD
#                                finds what the command needs on this machine anyway (its own
#                                packages, environment modules, conda), one line says so and the
#                                script goes on; else it says what to install and stops
#   have_build_tools             what the trainers and the tokenizer need to build: a C compiler,
#                                make, xz, pkg-config and PCRE2 (the Makefile's own probe)
#   need_pypi PYTHON CHECK SPEC...   PyPI packages for PYTHON: installed with pip unless the
#                                Python statement CHECK runs (as root for the system, else --user)
#   need_torch PYTHON            PyTorch 1.13 or newer for PYTHON (from where: see below)
# DRY_RUN=1: say what would be installed, install nothing.
# A pipeline here reads its input to the end (grep without -q): grep -q stops at its match and
# leaves the command before it to die of SIGPIPE, which the callers' pipefail makes a failure.

# as_root CMD...: run CMD as root (directly, or through sudo); 1 if neither is possible
as_root() {
    if [ "$(id -u)" = 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1 && sudo -v; then
        sudo "$@"
    else
        return 1
    fi
}

have_build_tools() {
    command -v "${CC:-cc}" > /dev/null 2>&1 && command -v make > /dev/null 2>&1 && command -v xz > /dev/null 2>&1 &&
        pkg-config --exists libpcre2-8 2> /dev/null
}

need_packages() {
    local have=false
    if [ "${1:-}" = --have ]; then have=$2; shift 2; fi
    if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
        if $have; then
            echo "setup: no apt-get here (not Debian or Ubuntu), and this machine has what the command needs; going on"
            return 0
        fi
        echo "setup: no apt-get here (not Debian or Ubuntu); install the equivalents of: $* (a C compiler, make," \
             "xz, pkg-config and PCRE2's development files at least), then run this again" >&2
        exit 1
    fi
    local missing=() optional=() p
    for p in "$@"; do
        case "$p" in
            \?*) package_installed "${p#?}" || optional+=("${p#?}") ;;
            *) package_installed "$p" || missing+=("$p") ;;
        esac
    done
    # an optional package that the archive, as apt knows it so far, lacks is not missing
    local known=() unknown=()
    for p in "${optional[@]}"; do if apt_has "$p"; then known+=("$p"); else unknown+=("$p"); fi; done
    [ ${#missing[@]} -eq 0 ] && [ ${#known[@]} -eq 0 ] && return 0
    local wanted=("${missing[@]}" "${known[@]}")
    if [ "${DRY_RUN:-0}" = 1 ]; then
        echo "setup: would install ${wanted[*]}"
        return 0
    fi
    local install=(apt-get install -y -q --no-install-recommends)
    # not as root and no sudo: the user runs the one command that installs them (the optional
    # ones apt does not know yet each in a clause of their own that may fail)
    if ! as_root true; then
        local line="apt-get update && ${install[*]} ${wanted[*]}"
        for p in "${unknown[@]}"; do line+=" && { ${install[*]} $p || true; }"; done
        if $have; then
            echo "setup: ${wanted[*]} not installed and no root to install them, but this machine has what the" \
                 "command needs; going on (to install them, as root: $line)"
            return 0
        fi
        echo "setup: ${wanted[*]} must be installed, which needs root. Run as root:" >&2
        echo "  $line" >&2
        echo "then run this command again." >&2
        exit 1
    fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
    # the archive as apt knows it now decides the optional ones
    wanted=("${missing[@]}")
    for p in "${optional[@]}"; do
        if apt_has "$p"; then wanted+=("$p"); else echo "setup: $p is not in this distribution's archive; going on without it"; fi
    done
    [ ${#wanted[@]} -gt 0 ] || return 0
    echo "setup: installing ${wanted[*]} (apt-get)"
    as_root env DEBIAN_FRONTEND=noninteractive "${install[@]}" "${wanted[@]}"
}

package_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep ' installed$' > /dev/null; }

# the version of PKG that apt would install, as it knows the archive now; nothing if none
apt_candidate() { apt-cache policy "$1" 2>/dev/null | sed -n 's/^  Candidate: \([^(].*\)$/\1/p'; }
apt_has() { [ -n "$(apt_candidate "$1")" ]; }

need_pypi() {
    local python="$1" check="$2"
    shift 2
    "$python" -c "$check" >/dev/null 2>&1 && return 0
    if [ "${DRY_RUN:-0}" = 1 ]; then
        echo "setup: would install $* for $python (pip)"
        return 0
    fi
    echo "setup: installing $* for $python (pip)"
    pip_install "$python" "$@"
    "$python" -c "$check" || { echo "setup: $* installed, but '$check' still fails for $python" >&2; exit 1; }
}

# pip_install PYTHON ARGS...: pip install for PYTHON, as root for the system, else --user
pip_install() {
    local python="$1"
    shift
    local pip=("$python" -m pip install -q)
    # Debian 12 and Ubuntu 24.04 mark the system Python as externally managed; older pips lack the flag
    if "$python" -m pip install --help | grep -- --break-system-packages > /dev/null; then
        pip+=(--break-system-packages)
    fi
    if [ "$(id -u)" = 0 ]; then "${pip[@]}" "$@"; else "${pip[@]}" --user "$@"; fi
}

# need_torch PYTHON: PyTorch 1.13 or newer for PYTHON (the tests' reference). The distribution's
# python3-torch where its archive has 1.13 or newer (Debian 12: 1.13.1); else (Ubuntu 22.04 has
# 1.8.1, 24.04 none) PyTorch's CPU-only wheel from its own index, which pulls no CUDA libraries,
# and where that index cannot be reached, PyPI's torch (with the CUDA libraries it depends on).
TORCH_CHECK="import sys, torch; sys.exit(tuple(int(x) for x in torch.__version__.split('+')[0].split('.')[:2]) < (1, 13))"
need_torch() {
    local python="$1" candidate
    "$python" -c "$TORCH_CHECK" >/dev/null 2>&1 && return 0
    candidate=$(apt_candidate python3-torch)
    # the archive's, where it may be installed; else pip (--user without root)
    if [ -n "$candidate" ] && dpkg --compare-versions "$candidate" ge 1.13 && as_root true; then
        need_packages python3-torch
        if [ "${DRY_RUN:-0}" = 1 ] || "$python" -c "$TORCH_CHECK" >/dev/null 2>&1; then return 0; fi
    fi
    if [ "${DRY_RUN:-0}" = 1 ]; then
        echo "setup: would install torch for $python (pip, PyTorch's CPU-only index)"
        return 0
    fi
    echo "setup: installing torch for $python from PyTorch's CPU-only index (pip)"
    if ! pip_install "$python" --index-url https://download.pytorch.org/whl/cpu torch; then
        echo "setup: PyTorch's index (download.pytorch.org) did not serve torch; installing PyPI's torch instead (with the CUDA libraries it depends on, about 3 GB)"
        pip_install "$python" torch
    fi
    "$python" -c "$TORCH_CHECK" || { echo "setup: torch installed, but it does not import as 1.13 or newer for $python" >&2; exit 1; }
}
