/* Preloaded into redis-server (LD_PRELOAD): every fsync and fdatasync
   sleeps SLOW_FSYNC_MS first, as on a disk busy with other writes. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

static void slow(void) {
	const char *ms = getenv("SLOW_FSYNC_MS");
	if (ms != NULL) {
		usleep((useconds_t)atoi(ms) * 1000);
	}
}

int fsync(int fd) {
	int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
	slow();
	return real(fd);
}

int fdatasync(int fd) {
	int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
	slow();
	return real(fd);
}
