# The recipes' checks of their settings, before anything is built or launched: one error line on
# stderr, exit 2. Sourced (from the repository's root) by run_gpt2_124M.sh, run_gpt2_124M_cpu.sh
# and multi_node/mpirun_hostfile.sh.
#
#   recipe_counts VAR...        each $VAR is a whole number >= 1
#   recipe_mpirun WHAT          mpirun is installed; WHAT says what launches with it and the way around
#   recipe_program VAR HINT     $VAR is a program here (a path or a command); HINT ends the line

recipe_counts() {
    local var
    for var in "$@"; do
        [[ "${!var}" =~ ^[1-9][0-9]*$ ]] || { echo "error: $var='${!var}': expected a whole number >= 1" >&2; exit 2; }
    done
}

recipe_mpirun() {
    command -v mpirun > /dev/null || { echo "error: $1 launches with mpirun, which is not installed (apt-get install openmpi-bin)${2:+; $2}" >&2; exit 2; }
}

recipe_program() {
    command -v "${!1}" > /dev/null || { echo "error: $1='${!1}' is not a program here ($2)" >&2; exit 2; }
}
