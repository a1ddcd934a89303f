/*
 * guestd: the PID 1 duties of stage two.  Stage one (initramfs) has mounted
 * the root disk and switched to it; here the API filesystems, hostname and
 * network come up, and "shutdown" powers the VM off.  No ip(8): ioctls.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <net/route.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guestd.h"
#include "log.h"

/*
 * Stage one may have moved its /dev and /run over: keep those.  /proc and
 * /sys are always mounted afresh so they show this pid and net namespace.
 */
static int
is_mountpoint(const char *dst)
{
	char parent[PATH_MAX];
	struct stat a, b;

	snprintf(parent, sizeof(parent), "%s/..", dst);
	return stat(dst, &a) == 0 && stat(parent, &b) == 0 &&
	    a.st_dev != b.st_dev;
}

static void
do_mount(const char *src, const char *dst, const char *type,
    unsigned long flags, const char *data)
{
	mkdir(dst, 0755);
	if ((strcmp(dst, "/dev") == 0 || strcmp(dst, "/run") == 0) &&
	    is_mountpoint(dst))
		return;
	if (mount(src, dst, type, flags, data) == -1 && errno != EBUSY)
		log_warn("mount %s on %s", type, dst);
}

/* Without a console on 0-2, a job's dup2 targets could collide. */
static void
ensure_std_fds(void)
{
	int fd;

	while ((fd = open("/dev/null", O_RDWR)) != -1 && fd <= 2)
		;
	if (fd > 2)
		close(fd);
}

static int
if_flags_up(int sock, const char *name)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(sock, SIOCGIFFLAGS, &ifr) == -1)
		return -1;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	return ioctl(sock, SIOCSIFFLAGS, &ifr);
}

void
init_lo(void)
{
	int s;

	if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1) {
		log_warn("lo: socket");
		return;
	}
	if (if_flags_up(s, "lo") == -1)
		log_warn("lo: up");
	close(s);
}

static int
set_inaddr(int sock, const char *ifname, unsigned long req, in_addr_t a)
{
	struct ifreq ifr;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = a;
	return ioctl(sock, req, &ifr);
}

#define NET_MAX_DNS	3

/* Atomically replaces /etc/resolv.conf with these resolvers: 0 or -1. */
static int
resolv_write(const struct in_addr *dns, int ndns)
{
	char text[NET_MAX_DNS * 32], ip[INET_ADDRSTRLEN];
	size_t len = 0;
	int fd;

	for (int i = 0; i < ndns && i < NET_MAX_DNS; i++) {
		if (inet_ntop(AF_INET, &dns[i], ip, sizeof(ip)) == NULL)
			return -1;
		len += (size_t)snprintf(text + len, sizeof(text) - len,
		    "nameserver %s\n", ip);
	}
	if ((fd = open("/etc/.resolv.conf.guestd", O_WRONLY | O_CREAT |
	    O_TRUNC | O_CLOEXEC, 0644)) == -1)
		return -1;
	if (write(fd, text, len) != (ssize_t)len || fsync(fd) == -1) {
		close(fd);
		return -1;
	}
	if (close(fd) == -1 ||
	    rename("/etc/.resolv.conf.guestd", "/etc/resolv.conf") == -1)
		return -1;
	return 0;
}

/* The host's resolvers from the command line, where there are any. */
static void
write_resolv(char *const *dns, int ndns)
{
	struct in_addr a[NET_MAX_DNS];
	int n = 0;

	for (int i = 0; i < ndns && i < NET_MAX_DNS; i++) {
		if (inet_pton(AF_INET, dns[i], &a[n]) != 1) {
			log_warnx("mcpvm.net: dns=%s is not an IPv4 address",
			    dns[i]);
			continue;
		}
		n++;
	}
	if (n > 0 && resolv_write(a, n) == -1)
		log_warn("/etc/resolv.conf");
}

/* Adds (SIOCADDRT) or deletes (SIOCDELRT) eth0's default route. */
static int
route_default(int s, unsigned long req, in_addr_t gw)
{
	struct rtentry rt;
	struct sockaddr_in *sin;

	memset(&rt, 0, sizeof(rt));
	sin = (struct sockaddr_in *)&rt.rt_dst;
	sin->sin_family = AF_INET;
	sin = (struct sockaddr_in *)&rt.rt_genmask;
	sin->sin_family = AF_INET;
	sin = (struct sockaddr_in *)&rt.rt_gateway;
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = gw;
	rt.rt_flags = RTF_UP | (req == SIOCADDRT ? RTF_GATEWAY : 0);
	rt.rt_dev = (char *)"eth0";
	return ioctl(s, req, &rt);
}

/*
 * mcpvm.net=10.232.N.2/30,gw=10.232.N.1[,dns=IP]... (at most three dns)
 * on the kernel command line: configures eth0, which the VM has only when
 * networking is on, and the resolvers in /etc/resolv.conf.
 */
static void
init_eth0(const char *spec)
{
	char buf[192], *addr, *gw = NULL, *dns[NET_MAX_DNS], *slash, *opt;
	char *save;
	int ndns = 0;
	struct in_addr a, g;
	in_addr_t mask;
	long plen;
	int s, i;

	snprintf(buf, sizeof(buf), "%s", spec);
	addr = strtok_r(buf, ",", &save);
	while ((opt = strtok_r(NULL, ",", &save)) != NULL) {
		if (strncmp(opt, "gw=", 3) == 0)
			gw = opt + 3;
		else if (strncmp(opt, "dns=", 4) == 0 && ndns < NET_MAX_DNS)
			dns[ndns++] = opt + 4;
		else
			log_warnx("mcpvm.net: unknown option %s", opt);
	}
	if (addr == NULL || (slash = strchr(addr, '/')) == NULL) {
		log_warnx("mcpvm.net=%s: no prefix length", spec);
		return;
	}
	*slash = '\0';
	plen = strtol(slash + 1, NULL, 10);
	if (inet_pton(AF_INET, addr, &a) != 1 || plen < 1 || plen > 32 ||
	    (gw != NULL && inet_pton(AF_INET, gw, &g) != 1)) {
		log_warnx("mcpvm.net=%s: not an address", spec);
		return;
	}
	mask = htonl(plen == 32 ? 0xffffffffu : ~(0xffffffffu >> plen));
	/* The NIC driver may still be probing: give it two seconds. */
	for (i = 0; i < 40 && access("/sys/class/net/eth0", F_OK) == -1; i++)
		usleep(50000);
	if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
		return;
	if (set_inaddr(s, "eth0", SIOCSIFADDR, a.s_addr) == -1 ||
	    set_inaddr(s, "eth0", SIOCSIFNETMASK, mask) == -1 ||
	    if_flags_up(s, "eth0") == -1) {
		log_warn("eth0: configure %s", spec);
		close(s);
		return;
	}
	if (gw != NULL) {
		if (route_default(s, SIOCADDRT, g.s_addr) == -1 &&
		    errno != EEXIST)
			log_warn("eth0: default route via %s", gw);
	}
	close(s);
	if (ndns > 0)
		write_resolv(dns, ndns);
	log_info("eth0: %s", spec);
}

/*
 * A clone's own network (the identity op's "net", proto/guest.h): eth0
 * still has the source's MAC, address and route.  eth0 goes down first,
 * which drops its routes and neighbours; then the MAC (a MAC change
 * flushes the neighbours again), the address and mask replace the old
 * ones, any ARP entry still on eth0 is deleted and none may remain, and
 * eth0 comes up with the default route via the new gateway.  0, or -1
 * with the step that failed in err.
 */
static int
arp_flush_eth0(int s, char *err, size_t errlen)
{
	char line[256], ip[64], dev[IFNAMSIZ + 1];
	struct arpreq ar;
	struct sockaddr_in *sin;
	struct in_addr a;
	FILE *f;
	int left = 0;

	for (int pass = 0; pass < 2; pass++) {
		if ((f = fopen("/proc/net/arp", "re")) == NULL) {
			snprintf(err, errlen, "neighbours: /proc/net/arp: %s",
			    strerror(errno));
			return -1;
		}
		left = 0;
		(void)fgets(line, sizeof(line), f);	/* the heading */
		while (fgets(line, sizeof(line), f) != NULL) {
			if (sscanf(line, "%63s %*s %*s %*s %*s %16s", ip,
			    dev) != 2 || strcmp(dev, "eth0") != 0 ||
			    inet_pton(AF_INET, ip, &a) != 1)
				continue;
			left++;
			if (pass == 1)
				continue;
			memset(&ar, 0, sizeof(ar));
			sin = (struct sockaddr_in *)&ar.arp_pa;
			sin->sin_family = AF_INET;
			sin->sin_addr = a;
			snprintf(ar.arp_dev, sizeof(ar.arp_dev), "eth0");
			if (ioctl(s, SIOCDARP, &ar) == -1 && errno != ENXIO) {
				snprintf(err, errlen, "neighbours: delete %s: "
				    "%s", ip, strerror(errno));
				fclose(f);
				return -1;
			}
		}
		fclose(f);
	}
	if (left > 0) {
		snprintf(err, errlen, "neighbours: %d entries of eth0 "
		    "survived", left);
		return -1;
	}
	return 0;
}

int
init_eth0_renew(const struct glink_net *n, char *err, size_t errlen)
{
	struct in_addr dns[NET_MAX_DNS];
	struct ifreq ifr;
	in_addr_t mask;
	int s, rc = -1;

	if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "eth0");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) == -1) {
		snprintf(err, errlen, "eth0: %s", strerror(errno));
		goto out;
	}
	ifr.ifr_flags &= ~IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) == -1) {
		snprintf(err, errlen, "eth0: down: %s", strerror(errno));
		goto out;
	}
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "eth0");
	ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
	memcpy(ifr.ifr_hwaddr.sa_data, n->mac, sizeof(n->mac));
	if (ioctl(s, SIOCSIFHWADDR, &ifr) == -1) {
		snprintf(err, errlen, "mac: SIOCSIFHWADDR: %s",
		    strerror(errno));
		goto out;
	}
	mask = htonl(0xffffffffu << (32 - n->prefix));
	if (set_inaddr(s, "eth0", SIOCSIFADDR, n->address) == -1 ||
	    set_inaddr(s, "eth0", SIOCSIFNETMASK, mask) == -1) {
		snprintf(err, errlen, "address: %s", strerror(errno));
		goto out;
	}
	if (arp_flush_eth0(s, err, errlen) == -1)
		goto out;
	if (if_flags_up(s, "eth0") == -1) {
		snprintf(err, errlen, "eth0: up: %s", strerror(errno));
		goto out;
	}
	/* Down took the old default route; one that stayed goes too. */
	for (int i = 0; i < 8 && route_default(s, SIOCDELRT, 0) == 0; i++)
		;
	if (route_default(s, SIOCADDRT, n->gateway) == -1 && errno != EEXIST) {
		snprintf(err, errlen, "gateway: default route: %s",
		    strerror(errno));
		goto out;
	}
	for (int i = 0; i < n->ndns; i++)
		dns[i].s_addr = n->dns[i];
	if (n->ndns > 0 && resolv_write(dns, n->ndns) == -1) {
		snprintf(err, errlen, "dns: /etc/resolv.conf: %s",
		    strerror(errno));
		goto out;
	}
	rc = 0;
out:
	close(s);
	return rc;
}

/* Value of key=... on the kernel command line, or NULL. */
static char *
cmdline_get(const char *key, char *out, size_t outlen)
{
	char buf[4096], *tok, *save;
	size_t klen = strlen(key);
	ssize_t n;
	int fd;

	if ((fd = open(opts.cmdline, O_RDONLY | O_CLOEXEC)) == -1)
		return NULL;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	for (tok = strtok_r(buf, " \t\n", &save); tok != NULL;
	    tok = strtok_r(NULL, " \t\n", &save))
		if (strncmp(tok, key, klen) == 0 && tok[klen] == '=') {
			snprintf(out, outlen, "%s", tok + klen + 1);
			return out;
		}
	return NULL;
}

void
read_boot_id(char *out, size_t len)
{
	ssize_t n;
	int fd;

	snprintf(out, len, "unknown");
	if ((fd = open("/proc/sys/kernel/random/boot_id",
	    O_RDONLY | O_CLOEXEC)) == -1)
		return;
	n = read(fd, out, len - 1);
	close(fd);
	if (n > 0) {
		out[n] = '\0';
		out[strcspn(out, "\n")] = '\0';
	}
}

/*
 * The kernel's defaults (0) let uid 1000 hard-link any file it can name,
 * root's included, into /workspace, and follow others' symlinks in sticky
 * directories; no systemd in the guest raises them.  Only in the VM's own
 * kernel: in a test harness's pid namespace these are the host's.
 */
static void
init_fs_protections(void)
{
	static const char *const keys[] = {
		"/proc/sys/fs/protected_hardlinks",
		"/proc/sys/fs/protected_symlinks",
	};
	size_t i;
	int fd;

	if (!in_initial_pidns())
		return;
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if ((fd = open(keys[i], O_WRONLY | O_CLOEXEC)) == -1 ||
		    write(fd, "1\n", 2) != 2)
			log_warn("%s", keys[i]);
		if (fd != -1)
			close(fd);
	}
}

void
init_system(void)
{
	char val[256];
	struct stat st;

	do_mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    NULL);
	do_mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    NULL);
	do_mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
	ensure_std_fds();
	do_mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
	    "gid=5,mode=0620,ptmxmode=0666");
	do_mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV,
	    "mode=1777");
	do_mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
	do_mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
	do_mount("cgroup2", "/sys/fs/cgroup", "cgroup2",
	    MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	init_fs_protections();
	if (cmdline_get("mcpvm.hostname", val, sizeof(val)) == NULL)
		snprintf(val, sizeof(val), "mcpvm");
	if (sethostname(val, strlen(val)) == -1)
		log_warn("sethostname");
	init_lo();
	if (cmdline_get("mcpvm.net", val, sizeof(val)) != NULL)
		init_eth0(val);
	/* The image should have these; a job must never fail for lack. */
	if (stat(opts.workspace, &st) == -1 && mkdir(opts.workspace,
	    0755) == 0 && chown(opts.workspace, opts.uid, opts.gid) == -1)
		log_warn("chown %s", opts.workspace);
	if (stat(opts.home, &st) == -1 && mkdir(opts.home, 0755) == 0 &&
	    chown(opts.home, opts.uid, opts.gid) == -1)
		log_warn("chown %s", opts.home);
	log_info("stage two up");
}

/* The initial pid namespace has a fixed inode number (PROC_PID_INIT_INO). */
int
in_initial_pidns(void)
{
	struct stat st;

	return stat("/proc/self/ns/pid", &st) == 0 && st.st_ino == 0xEFFFFFFCU;
}

void
init_poweroff(void)
{
	int i;

	log_info("powering off");
	jobs_shutdown();
	kill(-1, SIGTERM);
	for (i = 0; i < 20; i++) {
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		usleep(50000);
	}
	kill(-1, SIGKILL);
	sync();
	/*
	 * Only the VM's real init may remount / read-only: in a pid namespace
	 * (the test harness) that would remount the host's root filesystem,
	 * and reboot() there merely ends the namespace.
	 */
	if (in_initial_pidns() &&
	    mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY, NULL) == -1)
		log_warn("remount / read-only");
	sync();
	reboot(RB_POWER_OFF);
	fatal("reboot");
}
