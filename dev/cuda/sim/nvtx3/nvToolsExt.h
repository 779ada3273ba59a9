/*
 * Host simulator, NVTX: a stand-in for the toolkit's header-only <nvtx3/nvToolsExt.h> (the ranges a
 * profiler such as Nsight Systems shows). Ranges must nest: a pop without a push is a simulator
 * error. With SIM_NVTX_LOG=<file>, every push ("push <name> <depth>") and pop ("pop <depth>") is
 * appended to the file, so a test can see which ranges a run opened.
 */
#ifndef SIM_NVTX_TOOLS_EXT_H
#define SIM_NVTX_TOOLS_EXT_H

#include <stdio.h>
#include <stdlib.h>

namespace sim {
static int nvtx_depth = 0;
static inline FILE *nvtx_log(void) {
    static FILE *f = NULL;
    static bool opened = false;
    if (!opened) {
        opened = true;
        const char *path = getenv("SIM_NVTX_LOG");
        if (path && path[0]) { f = fopen(path, "a"); }
    }
    return f;
}
}  // namespace sim

static inline int nvtxRangePushA(const char *message) {
    if (FILE *f = sim::nvtx_log()) { fprintf(f, "push %s %d\n", message, sim::nvtx_depth); fflush(f); }
    return sim::nvtx_depth++;
}

static inline int nvtxRangePop(void) {
    if (sim::nvtx_depth == 0) {
        fprintf(stderr, "sim error: nvtxRangePop without an open range\n");
        exit(1);
    }
    --sim::nvtx_depth;
    if (FILE *f = sim::nvtx_log()) { fprintf(f, "pop %d\n", sim::nvtx_depth); fflush(f); }
    return sim::nvtx_depth;
}

#endif  // SIM_NVTX_TOOLS_EXT_H
