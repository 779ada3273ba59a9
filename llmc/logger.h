/*
 * main.log in the output dir, written by rank 0 only: one line per event, "s:<step>" then
 * key:value pairs. Keys: trl (train loss), lr, norm (gradient norm before clipping), tok (tokens
 * seen after this step), tel (val loss), hsw (HellaSwag acc_norm), skip (a guard skipped the step).
 * s is the number of optimizer steps completed before the event, as in llm.c's logs. A resumed
 * run appends, so a step can appear twice; readers (dev/plot_log.py) keep the last value.
 * Losses are written with 9 significant digits: a float round-trips exactly, so logs of two
 * runs can be compared bit for bit.
 */
#ifndef LLMC_LOGGER_H
#define LLMC_LOGGER_H

#include "utils.h"

typedef struct {
    FILE *fp;  // NULL: logging off (no -o, or not rank 0)
} Logger;

static inline void logger_init(Logger *lg, const char *dir, int rank, int append) {
    lg->fp = NULL;
    if (rank != 0 || dir == NULL || dir[0] == '\0') { return; }
    char path[4096];
    snprintf(path, sizeof(path), "%s/main.log", dir);
    lg->fp = fopenCheck(path, append ? "a" : "w");
}

static void logger_printf(Logger *lg, const char *fmt, ...) LLMC_PRINTF(2, 3);
static void logger_printf(Logger *lg, const char *fmt, ...) {
    if (lg->fp == NULL) { return; }
    va_list ap;
    va_start(ap, fmt);
    vfprintf(lg->fp, fmt, ap);
    va_end(ap);
    fflush(lg->fp);
}

static inline void logger_free(Logger *lg) {
    if (lg->fp) { fclose(lg->fp); }
    lg->fp = NULL;
}

#endif  // LLMC_LOGGER_H
