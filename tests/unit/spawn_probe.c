/*
 * What test_spawn starts through vmmd's spawner: it reports, on fd 3 (or
 * on fd 1 when its argument is --version, as QEMU's version run), the
 * ids, session, parent, NoNewPrivs, capabilities and every open
 * descriptor it was started with, then exits.  With --paths, a second
 * line: its mount namespace, whether it could make a file in /tmp and in
 * /dev/shm (probe-made), and for each path after --paths whether it sees
 * it (1 or 0).
 */
#include <sys/types.h>

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void
status_field(const char *key, char *out, size_t outlen)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "re");
	size_t n = strlen(key);

	out[0] = '\0';
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, key, n) == 0 && line[n] == ':') {
			snprintf(out, outlen, "%s", line + n + 1 +
			    strspn(line + n + 1, " \t"));
			out[strcspn(out, "\n")] = '\0';
			break;
		}
	fclose(f);
}

int
main(int argc, char *argv[])
{
	char fds[256] = "", nnp[32], capeff[32], capprm[32], groups[128];
	int out = argc > 1 && strcmp(argv[1], "--version") == 0 ? 1 : 3;
	size_t off = 0;
	FILE *f;

	/* Before anything of ours opens a descriptor. */
	for (int fd = 0; fd < 1024; fd++)
		if (fcntl(fd, F_GETFD) != -1)
			off += (size_t)snprintf(fds + off, sizeof(fds) - off,
			    "%s%d", off ? "," : "", fd);
	status_field("NoNewPrivs", nnp, sizeof(nnp));
	status_field("CapEff", capeff, sizeof(capeff));
	status_field("CapPrm", capprm, sizeof(capprm));
	status_field("Groups", groups, sizeof(groups));
	if ((f = fdopen(out, "w")) == NULL)
		return 1;
	fprintf(f, "uid=%d gid=%d euid=%d ppid=%d sid_is_pid=%d nnp=%s "
	    "capeff=%s capprm=%s groups=[%s] fds=%s argc=%d\n",
	    (int)getuid(), (int)getgid(), (int)geteuid(), (int)getppid(),
	    getsid(0) == getpid(), nnp, capeff, capprm, groups, fds, argc);
	if (argc > 1 && strcmp(argv[1], "--paths") == 0) {
		char ns[64] = "";
		ssize_t n = readlink("/proc/self/ns/mnt", ns, sizeof(ns) - 1);
		int made = 1;

		ns[n > 0 ? n : 0] = '\0';
		for (int i = 0; i < 2; i++) {
			int fd = open(i == 0 ? "/tmp/probe-made" :
			    "/dev/shm/probe-made", O_WRONLY | O_CREAT | O_EXCL,
			    0600);

			if (fd == -1)
				made = 0;
			else
				close(fd);
		}
		fprintf(f, "%s made=%d", ns, made);
		for (int i = 2; i < argc; i++)
			fprintf(f, " %d", access(argv[i], F_OK) == 0);
		fprintf(f, "\n");
	}
	fclose(f);
	return 0;
}
