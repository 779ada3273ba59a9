// Shared by the harnesses of the tools' command lines (fuzz_tokenize_args.c, fuzz_export_args.c):
// the input is a command line, arguments separated by NUL bytes, and the tool's main runs it in a
// work folder that holds small valid files under short names ($FUZZ_SEEDS/work_files, made by
// make_seeds.sh), a FIFO named "fifo" and a folder named "dir". An argument with a '/' (a path out
// of the folder) or "-" (stdin, which a fuzzer cannot feed) makes the input uninteresting, so
// nothing is read or written outside the folder; it is emptied and refilled before every input.
#ifndef LLMC_FUZZ_TOOL_ARGS_H
#define LLMC_FUZZ_TOOL_ARGS_H

#include <ftw.h>

#define TOOL_MAX_ARGS 32
#define TOOL_MAX_FILES 64

typedef struct {
    char name[256];   // relative to the work folder
    int is_dir;
    char *data;       // a file's bytes
    size_t size;
} ToolFile;

static ToolFile tool_files[TOOL_MAX_FILES];
static int tool_nfiles;
static char tool_seed_dir[512], tool_work[512];

static int tool_collect(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)ftw;
    if (strcmp(path, tool_seed_dir) == 0) { return 0; }
    if (tool_nfiles == TOOL_MAX_FILES) { fuzz_fail("more than %d work files", TOOL_MAX_FILES); }
    ToolFile *f = &tool_files[tool_nfiles++];
    snprintf(f->name, sizeof(f->name), "%s", path + strlen(tool_seed_dir) + 1);
    f->is_dir = flag == FTW_D;
    if (!f->is_dir) {
        if (!S_ISREG(st->st_mode)) { fuzz_fail("%s is not a regular file", path); }
        FILE *in = fopen(path, "rb");
        f->size = (size_t)st->st_size;
        f->data = (char *)malloc(f->size + 1);
        if (in == NULL || fread(f->data, 1, f->size, in) != f->size) { fuzz_fail("cannot read %s", path); }
        fclose(in);
    }
    return 0;
}

static int tool_remove(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st; (void)flag;
    if (ftw->level > 0 && remove(path) != 0) { fuzz_fail("cannot remove %s", path); }
    return 0;
}

// once: read the work files into memory, make the work folder and enter it
static void tool_setup(void) {
    const char *seeds = getenv("FUZZ_SEEDS");
    if (seeds == NULL) { fuzz_fail("set FUZZ_SEEDS to the seeds folder of make_seeds.sh (run.sh does)"); }
    snprintf(tool_seed_dir, sizeof(tool_seed_dir), "%s/work_files", seeds);
    if (nftw(tool_seed_dir, tool_collect, 16, FTW_PHYS) != 0) { fuzz_fail("cannot read %s", tool_seed_dir); }
    snprintf(tool_work, sizeof(tool_work), "%s", fuzz_path("work"));
    make_dirs(tool_work);
    if (chdir(tool_work) != 0) { fuzz_fail("cannot enter %s", tool_work); }
}

// before every input: the work folder as made by tool_setup, whatever the last run did to it
static void tool_reset(void) {
    nftw(tool_work, tool_remove, 16, FTW_DEPTH | FTW_PHYS);
    for (int i = 0; i < tool_nfiles; i++) {  // nftw lists a folder before its files
        const ToolFile *f = &tool_files[i];
        if (f->is_dir) { mkdir(f->name, 0755); continue; }
        FILE *out = fopen(f->name, "wb");
        if (out == NULL || fwrite(f->data, 1, f->size, out) != f->size || fclose(out) != 0) { fuzz_fail("cannot write %s", f->name); }
    }
    if (mkfifo("fifo", 0644) != 0 || mkdir("dir", 0755) != 0) { fuzz_fail("cannot make fifo and dir"); }
}

typedef int (*ToolMain)(int argc, char **argv);
typedef struct {
    ToolMain main_fn;
    int argc;
    char **argv;
} ToolCase;

static void tool_run(void *arg) {
    ToolCase *c = (ToolCase *)arg;
    optind = 0;  // getopt starts over (glibc)
    c->main_fn(c->argc, c->argv);
}

// one input: the command line (argv[0] = tool) run by main_fn in a fresh work folder, unless an
// argument leaves the folder or reads stdin
static void tool_fuzz_one(const uint8_t *data, size_t size, const char *tool, ToolMain main_fn) {
    if (tool_nfiles == 0) { tool_setup(); }
    char *buf = (char *)malloc(size + 1);
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *argv[TOOL_MAX_ARGS + 2];
    ToolCase c = {main_fn, 0, argv};
    argv[c.argc++] = (char *)tool;
    int runnable = 1;
    for (size_t i = 0; i <= size && c.argc <= TOOL_MAX_ARGS; i += strlen(buf + i) + 1) {
        if (strchr(buf + i, '/') || strcmp(buf + i, "-") == 0) { runnable = 0; }
        argv[c.argc++] = buf + i;
    }
    argv[c.argc] = NULL;
    if (runnable) {
        tool_reset();
        if (fuzz_call(tool_run, &c)) { fuzz_end(); }
    }
    free(buf);
}

#endif
