/*
 * LD_PRELOAD shim that makes the disk slow to sync, for tests/reliability/test_faults.py.
 *
 * fdatasync, fsync and msync first sleep for the number of milliseconds written in the file
 * named by $SLOW_SYNC_CTL (read at every call, so a test changes the delay while the broker
 * runs; a missing or empty file means no delay), then do the real call. Everything else in the
 * process is untouched: the broker under test is the real one, only its disk got slow.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void slow_down(void) {
    const char *ctl = getenv("SLOW_SYNC_CTL");
    if (ctl == NULL) return;
    int saved = errno;
    FILE *f = fopen(ctl, "r");
    long ms = 0;
    if (f != NULL) {
        if (fscanf(f, "%ld", &ms) != 1) ms = 0;
        fclose(f);
    }
    if (ms > 0) {
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
        }
    }
    errno = saved;
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    slow_down();
    return real(fd);
}

int fsync(int fd) {
    static int (*real)(int);
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    slow_down();
    return real(fd);
}

int msync(void *addr, size_t length, int flags) {
    static int (*real)(void *, size_t, int);
    if (real == NULL) real = (int (*)(void *, size_t, int))dlsym(RTLD_NEXT, "msync");
    slow_down();
    return real(addr, length, flags);
}
