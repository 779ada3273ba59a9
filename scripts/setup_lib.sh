# Shared by scripts/quickstart.sh and scripts/test.sh (sourced, not run): install what a command
# needs, once. Run again, nothing is installed and nothing is asked.
#   need_packages PKG...         Debian/Ubuntu packages: the missing ones are installed with
#                                apt-get, as root or through sudo; where neither works, the one
#                                command to run is printed and the script stops
#   need_pypi PYTHON CHECK SPEC...   PyPI packages for PYTHON: installed with pip unless the
#                                Python statement CHECK runs (as root for the system, else --user)
# DRY_RUN=1: say what would be installed, install nothing.

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

need_packages() {
    if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
        echo "setup: no apt-get here (not Debian or Ubuntu); install the equivalents of: $*, then run this again" >&2
        exit 1
    fi
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q ' installed$' || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "${DRY_RUN:-0}" = 1 ]; then
        echo "setup: would install ${missing[*]}"
        return 0
    fi
    local install=(apt-get install -y -q --no-install-recommends "${missing[@]}")
    # not as root and no sudo: the user runs the one command that installs them
    if ! as_root true; then
        echo "setup: ${missing[*]} must be installed, which needs root. Run as root:" >&2
        echo "  apt-get update && ${install[*]}" >&2
        echo "then run this command again." >&2
        exit 1
    fi
    echo "setup: installing ${missing[*]} (apt-get)"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
    as_root env DEBIAN_FRONTEND=noninteractive "${install[@]}"
}

need_pypi() {
    local python="$1" check="$2"
    shift 2
    "$python" -c "$check" >/dev/null 2>&1 && return 0
    if [ "${DRY_RUN:-0}" = 1 ]; then
        echo "setup: would install $* for $python (pip)"
        return 0
    fi
    echo "setup: installing $* for $python (pip)"
    local pip=("$python" -m pip install -q)
    # Debian 12 and Ubuntu 24.04 mark the system Python as externally managed; older pips lack the flag
    if "$python" -m pip install --help | grep -q -- --break-system-packages; then
        pip+=(--break-system-packages)
    fi
    if [ "$(id -u)" = 0 ]; then "${pip[@]}" "$@"; else "${pip[@]}" --user "$@"; fi
    "$python" -c "$check" || { echo "setup: $* installed, but '$check' still fails for $python" >&2; exit 1; }
}
