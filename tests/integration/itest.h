/*
 * Helpers shared by vmmd's C integration tests: temporary directories,
 * running the event loop until a flag, running a command without a shell,
 * making and comparing files.
 */
#ifndef ITEST_H
#define ITEST_H

#include <sys/types.h>

struct event_base;

/* Runs base until *flag is set or ms elapsed; returns *flag. */
int	itest_run_until(struct event_base *, const int *flag, int ms);
/* fork+exec argv (NULL-terminated), waits; returns the exit status or -1. */
int	itest_run(char *const argv[]);
/* Same, output discarded. */
int	itest_run_quiet(char *const argv[]);
/* rm -rf path, without a shell. */
void	itest_rmtree(const char *path);
/* A uid with no /etc/passwd entry, for running QEMU as a VM would. */
uid_t	itest_free_uid(uid_t from);
long	itest_now_ms(void);
/* Writes mib MiB of varied data to path and fsyncs it; 0 or -1. */
int	itest_write_file(const char *path, size_t mib);
/* 1 when the files at a and b hold the same bytes. */
int	itest_same_content(const char *a, const char *b);
/*
 * What a test on a loop volume of file system fs needs before it runs:
 * root, fs's mkfs (mkfs.fs, from package pkg), and a private mount
 * namespace, so that its mounts vanish with it even if it is killed and
 * the host never sees them.  0 to go on, else the exit status: 77 (a
 * skip, saying why) or 1.
 */
int	itest_loop_volume_ready(const char *fs, const char *pkg);
/*
 * A sparse 1 GiB image at img (made, O_EXCL), made a file system by
 * mkfs (argv, its output discarded) and loop-mounted on dir (made);
 * 0 or -1.
 */
int	itest_loop_volume(const char *img, const char *dir,
	    char *const mkfs[]);

#endif
