/*
 * LD_PRELOAD shim that makes the disk slow, for tests/reliability/test_faults.py.
 *
 * fdatasync, fsync and msync first sleep for the number of milliseconds written in the file
 * named by $SLOW_SYNC_CTL, pwrite for the number in $SLOW_WRITE_CTL (read at every call, so a
 * test changes the delay while the broker runs; a missing or empty file means no delay), then
 * do the real call. Everything else in the process is untouched: the broker under test is the
 * real one, only its disk got slow.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <time.h>

static void slow_down(const char *variable) {
    const char *ctl = getenv(variable);
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
    slow_down("SLOW_SYNC_CTL");
    return real(fd);
}

int fsync(int fd) {
    static int (*real)(int);
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    slow_down("SLOW_SYNC_CTL");
    return real(fd);
}

int msync(void *addr, size_t length, int flags) {
    static int (*real)(void *, size_t, int);
    if (real == NULL) real = (int (*)(void *, size_t, int))dlsym(RTLD_NEXT, "msync");
    slow_down("SLOW_SYNC_CTL");
    return real(addr, length, flags);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    static ssize_t (*real)(int, const void *, size_t, off_t);
    if (real == NULL) real = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    slow_down("SLOW_WRITE_CTL");
    return real(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset) {
    return pwrite(fd, buf, count, offset);
}
