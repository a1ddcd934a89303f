/*
 * Unit tests for vmmd/cgroup's layout detection, fed made-up mount tables:
 * v2 with controllers, the hybrid v1 layout, and what is missing when
 * neither works; and where a delegated v2 cgroup (vmmd -D) puts things:
 * vmmd's own, or the holder unit's (cgroup_holder).  (The real host is
 * exercised by the integration test.)
 */
#include <sys/stat.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"
#include "../check_run.h"

static char dir[] = "/tmp/mcpvm-cgunit-XXXXXX";
static char ctrls[300];

static void
setup(void)
{
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(ctrls, sizeof(ctrls), "%s/cgroup.controllers", dir);
}

static void
teardown(void)
{
	unlink(ctrls);
	rmdir(dir);
}

static int
detect(const char *table, struct cg_host *h, const char *parent, char *err)
{
	FILE *f = fmemopen((void *)table, strlen(table), "r");
	int rc;

	ck_assert_ptr_nonnull(f);
	rc = cg_detect_from(f, h, parent, err, 512);
	fclose(f);
	return rc;
}

static void
write_ctrls(const char *s)
{
	FILE *f = fopen(ctrls, "w");

	ck_assert_ptr_nonnull(f);
	fputs(s, f);
	fclose(f);
}

START_TEST(v2_with_controllers)
{
	struct cg_host h;
	char table[1024], err[512], path[4096];

	write_ctrls("cpuset cpu io memory hugetlb pids rdma misc\n");
	snprintf(table, sizeof(table), "cgroup2 %s cgroup2 rw,nosuid 0 0\n",
	    dir);
	ck_assert_int_eq(detect(table, &h, "mcpvm", err), 0);
	ck_assert_int_eq(h.layout, CG_LAYOUT_V2);
	ck_assert_int_eq(cg_path(&h, 3, CG_PIDS, path, sizeof(path)), 0);
	ck_assert_str_eq(path + strlen(dir), "/mcpvm/vm-3");
}
END_TEST

/* cg_delegate_from with /proc/self/cgroup's content self. */
static int
delegate_holder(struct cg_host *h, const char *self, const char *holder,
    char *err)
{
	FILE *f = fmemopen((void *)self, strlen(self), "r");
	int rc;

	ck_assert_ptr_nonnull(f);
	rc = cg_delegate_from(h, f, holder, err, 512);
	fclose(f);
	return rc;
}

static int
delegate(struct cg_host *h, const char *self, char *err)
{
	return delegate_holder(h, self, "self", err);
}

/* A unit's cgroup under the made-up cgroup2 mount, with controllers. */
static void
named_unit_cgroup(const char *name, const char *unit_ctrls, char *path,
    size_t len)
{
	char p[4200];
	FILE *f;

	snprintf(path, len, "%s/system.slice", dir);
	mkdir(path, 0755);
	snprintf(path, len, "%s/system.slice/%s", dir, name);
	mkdir(path, 0755);
	snprintf(p, sizeof(p), "%s/cgroup.controllers", path);
	ck_assert_ptr_nonnull(f = fopen(p, "w"));
	fputs(unit_ctrls, f);
	fclose(f);
}

static void
unit_cgroup(const char *unit_ctrls, char *path, size_t len)
{
	named_unit_cgroup("mcpvm-vmmd.service", unit_ctrls, path, len);
}

static void
named_unit_cgroup_remove(const char *name)
{
	char p[4200];

	snprintf(p, sizeof(p), "%s/system.slice/%s/cgroup.controllers", dir,
	    name);
	unlink(p);
	snprintf(p, sizeof(p), "%s/system.slice/%s", dir, name);
	rmdir(p);
	snprintf(p, sizeof(p), "%s/system.slice", dir);
	rmdir(p);
}

static void
unit_cgroup_remove(void)
{
	named_unit_cgroup_remove("mcpvm-vmmd.service");
}

/* vmmd -D under systemd (Delegate=yes): everything inside its unit. */
START_TEST(v2_delegated_goes_inside_its_own_cgroup)
{
	struct cg_host h;
	char table[1024], err[512], path[4096], unit[4096];
	/* /proc/self/cgroup on a v2 host, and on a hybrid one. */
	const char *self = "0::/system.slice/mcpvm-vmmd.service\n";
	const char *hybrid = "12:memory:/system.slice/mcpvm-vmmd.service\n"
	    "1:name=systemd:/system.slice/mcpvm-vmmd.service\n"
	    "0::/system.slice/mcpvm-vmmd.service\n";

	write_ctrls("cpu io memory pids\n");
	snprintf(table, sizeof(table), "cgroup2 %s cgroup2 rw 0 0\n", dir);

	unit_cgroup("cpu memory pids\n", unit, sizeof(unit));
	ck_assert_int_eq(detect(table, &h, "mcpvm", err), 0);
	ck_assert_msg(delegate(&h, hybrid, err) == 0, "%s", err);
	ck_assert_int_eq(h.delegated, 1);
	ck_assert_int_eq(h.daemon_inside, 1);
	ck_assert_str_eq(h.v2_base, unit);
	ck_assert_int_eq(cg_path(&h, 3, CG_MEMORY, path, sizeof(path)), 0);
	ck_assert_str_eq(path + strlen(dir),
	    "/system.slice/mcpvm-vmmd.service/mcpvm/vm-3");

	/* A unit cgroup lacking a controller: named. */
	unit_cgroup_remove();
	unit_cgroup("memory\n", unit, sizeof(unit));
	ck_assert_int_eq(detect(table, &h, "mcpvm", err), 0);
	ck_assert_int_eq(delegate(&h, self, err), -1);
	ck_assert_msg(strstr(err, "lacks cpu pids") != NULL, "%s", err);
	ck_assert_int_eq(h.delegated, 0);
	unit_cgroup_remove();

	/* The root cgroup is nothing delegated. */
	ck_assert_int_eq(detect(table, &h, "mcpvm", err), 0);
	ck_assert_int_eq(delegate(&h, "0::/\n", err), -1);
	ck_assert_msg(strstr(err, "root cgroup") != NULL, "%s", err);
	/* No v2 line at all. */
	ck_assert_int_eq(delegate(&h, "3:pids:/x\n", err), -1);
	ck_assert_msg(strstr(err, "no cgroup2 entry") != NULL, "%s", err);
	/* The parent may not take the name of vmmd's own leaf. */
	ck_assert_int_eq(detect(table, &h, CG_DAEMON_LEAF, err), 0);
	unit_cgroup("cpu memory pids\n", unit, sizeof(unit));
	ck_assert_int_eq(delegate(&h, self, err), -1);
	ck_assert_msg(strstr(err, "vmmd's own leaf") != NULL, "%s", err);
	unit_cgroup_remove();
}
END_TEST

/*
 * The packaged units (cgroup_holder's default): the VMs go into the
 * holder unit's cgroup, wherever vmmd itself runs, and vmmd stays put.
 */
START_TEST(v2_holder_unit_holds_the_vms)
{
	struct cg_host h;
	char table[1024], err[512], path[4096], unit[4096];
	const char *holder = "/system.slice/mcpvm-vms.service";
	const char *self = "0::/system.slice/mcpvm-vmmd.service\n";
	const char *bad[] = { "system.slice/x.service", "/", "/a/../b",
	    "/a//b", NULL };
	int i;

	write_ctrls("cpu io memory pids\n");
	snprintf(table, sizeof(table), "cgroup2 %s cgroup2 rw 0 0\n", dir);

	/* Not there: the holder unit is not running. */
	ck_assert_int_eq(detect(table, &h, "mcpvm", err), 0);
	ck_assert_int_eq(delegate_holder(&h, self, holder, err), -1);
	ck_assert_msg(strstr(err, "is mcpvm-vms.service running") != NULL,
	    "%s", err);
	ck_assert_int_eq(h.delegated, 0);

	named_unit_cgroup("mcpvm-vms.service", "cpu memory pids\n", unit,
	    sizeof(unit));
	ck_assert_int_eq(detect(table, &h, "mcpvm", err), 0);
	ck_assert_msg(delegate_holder(&h, self, holder, err) == 0, "%s", err);
	ck_assert_int_eq(h.delegated, 1);
	ck_assert_int_eq(h.daemon_inside, 0);
	ck_assert_str_eq(h.v2_base, unit);
	ck_assert_int_eq(cg_path(&h, 3, CG_PIDS, path, sizeof(path)), 0);
	ck_assert_str_eq(path + strlen(dir),
	    "/system.slice/mcpvm-vms.service/mcpvm/vm-3");

	/* Paths that name no cgroup below the root. */
	for (i = 0; bad[i] != NULL; i++) {
		ck_assert_int_eq(detect(table, &h, "mcpvm", err), 0);
		ck_assert_int_eq(delegate_holder(&h, self, bad[i], err), -1);
		ck_assert_msg(strstr(err, "not a cgroup below the root") !=
		    NULL, "%s: %s", bad[i], err);
	}
	/* The parent may not take the name of vmhold's leaf. */
	ck_assert_int_eq(detect(table, &h, CG_HOLDER_LEAF, err), 0);
	ck_assert_int_eq(delegate_holder(&h, self, holder, err), -1);
	ck_assert_msg(strstr(err, "vmhold's leaf") != NULL, "%s", err);
	named_unit_cgroup_remove("mcpvm-vms.service");
}
END_TEST

/* A hybrid host's mounts: the v1 controllers, and cgroup2 at dir. */
static void
hybrid_table(char *table, size_t len)
{
	snprintf(table, len,
	    "cgroup2 %s cgroup2 rw 0 0\n"
	    "cgroup /sys/fs/cgroup/cpu cgroup rw,cpu,cpuacct 0 0\n"
	    "cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n"
	    "cgroup /sys/fs/cgroup/pids cgroup rw,pids 0 0\n"
	    "cgroup /sys/fs/cgroup/freezer cgroup rw,freezer 0 0\n", dir);
}

/* On v1 (a hybrid host) -D changes nothing: the parents stay at roots. */
START_TEST(v1_ignores_delegation)
{
	struct cg_host h;
	char table[2048], err[512], path[4096];

	write_ctrls("\n");
	hybrid_table(table, sizeof(table));
	ck_assert_int_eq(detect(table, &h, "mcpvm", err), 0);
	ck_assert_int_eq(h.layout, CG_LAYOUT_V1);
	ck_assert_int_eq(delegate(&h, "0::/system.slice/x.service\n", err),
	    0);
	ck_assert_int_eq(h.delegated, 0);
	ck_assert_str_eq(h.v2_track, "");
	ck_assert_int_eq(cg_path(&h, 1, CG_MEMORY, path, sizeof(path)), 0);
	ck_assert_str_eq(path, "/sys/fs/cgroup/memory/mcpvm/vm-1");
}
END_TEST

/*
 * A hybrid host under systemd with the holder unit: the limits stay on v1,
 * and each VM is also tracked in the holder's cgroup of the unified tree,
 * where systemd would otherwise count it as vmmd's.
 */
START_TEST(v1_tracks_vms_in_the_holder)
{
	struct cg_host h;
	struct cg_attach a;
	char table[2048], err[512], path[4096], unit[4096], want[4300];

	write_ctrls("\n");
	hybrid_table(table, sizeof(table));
	ck_assert_int_eq(detect(table, &h, "mcpvm", err), 0);
	ck_assert_int_eq(h.layout, CG_LAYOUT_V1);
	ck_assert_int_eq(delegate_holder(&h, "0::/x.service\n",
	    "/system.slice/mcpvm-vms.service", err), -1);
	ck_assert_msg(strstr(err, "is mcpvm-vms.service running") != NULL,
	    "%s", err);
	ck_assert_int_eq(delegate_holder(&h, "0::/x.service\n", "/", err), -1);
	ck_assert_msg(strstr(err, "not a cgroup below the root") != NULL, "%s",
	    err);

	named_unit_cgroup("mcpvm-vms.service", "\n", unit, sizeof(unit));
	ck_assert_int_eq(detect(table, &h, "mcpvm", err), 0);
	ck_assert_msg(delegate_holder(&h, "0::/x.service\n",
	    "/system.slice/mcpvm-vms.service", err) == 0, "%s", err);
	ck_assert_int_eq(h.delegated, 0);
	ck_assert_str_eq(h.v2_track, unit);
	ck_assert_int_eq(cg_path(&h, 1, CG_MEMORY, path, sizeof(path)), 0);
	ck_assert_str_eq(path, "/sys/fs/cgroup/memory/mcpvm/vm-1");
	/* A spawned VM process joins the four v1 cgroups and the holder's. */
	ck_assert_int_eq(cg_attach_prepare(&h, 1, &a), 0);
	ck_assert_uint_eq(a.n, CG_NCTRL + 1);
	snprintf(want, sizeof(want), "%s/mcpvm/vm-1/cgroup.procs", unit);
	ck_assert_str_eq(a.procs[CG_NCTRL], want);
	named_unit_cgroup_remove("mcpvm-vms.service");
}
END_TEST

START_TEST(hybrid_falls_back_to_v1)
{
	struct cg_host h;
	char table[2048], err[512], path[4096];

	/* cgroup2 without controllers, as on the CI host. */
	write_ctrls("\n");
	snprintf(table, sizeof(table),
	    "tmpfs /sys/fs/cgroup tmpfs rw 0 0\n"
	    "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n"
	    "cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n"
	    "cgroup /sys/fs/cgroup/pids cgroup rw,pids 0 0\n"
	    "cgroup /sys/fs/cgroup/cpuset cgroup rw,cpuset 0 0\n"
	    "cgroup /sys/fs/cgroup/freezer cgroup rw,freezer 0 0\n"
	    "cgroup /sys/fs/cgroup/systemd cgroup rw,name=systemd 0 0\n"
	    "cgroup2 %s cgroup2 rw 0 0\n", dir);
	ck_assert_int_eq(detect(table, &h, "mcpvm", err), 0);
	ck_assert_int_eq(h.layout, CG_LAYOUT_V1);
	ck_assert_str_eq(h.v1[CG_CPU], "/sys/fs/cgroup/cpu,cpuacct");
	/* "cpuset" must not be mistaken for "cpu". */
	ck_assert_str_eq(h.v1[CG_MEMORY], "/sys/fs/cgroup/memory");
	ck_assert_int_eq(cg_path(&h, 12, CG_FREEZER, path, sizeof(path)), 0);
	ck_assert_str_eq(path, "/sys/fs/cgroup/freezer/mcpvm/vm-12");
}
END_TEST

START_TEST(cpuset_alone_is_not_cpu)
{
	struct cg_host h;
	char err[512];

	ck_assert_int_eq(detect(
	    "cgroup /a cgroup rw,cpuset 0 0\n"
	    "cgroup /b cgroup rw,memory 0 0\n"
	    "cgroup /c cgroup rw,pids 0 0\n"
	    "cgroup /d cgroup rw,freezer 0 0\n", &h, "mcpvm", err), -1);
	ck_assert_int_eq(h.layout, CG_LAYOUT_NONE);
	ck_assert_msg(strstr(err, " cpu") != NULL, "%s", err);
}
END_TEST

START_TEST(nothing_usable_names_what_is_missing)
{
	struct cg_host h;
	char table[512], err[512];

	write_ctrls("cpu io\n");
	snprintf(table, sizeof(table), "cgroup2 %s cgroup2 rw 0 0\n"
	    "cgroup /m cgroup rw,memory 0 0\n", dir);
	ck_assert_int_eq(detect(table, &h, "mcpvm", err), -1);
	ck_assert_msg(strstr(err, "without the memory, cpu and pids") != NULL,
	    "%s", err);
	ck_assert_msg(strstr(err, "cpu pids freezer") != NULL, "%s", err);
}
END_TEST

START_TEST(parent_name_is_one_plain_component)
{
	struct cg_host h;
	char err[512];
	const char *bad[] = { "", "..", "a/b", "x y", "../etc", NULL };
	int i;

	for (i = 0; bad[i] != NULL; i++) {
		ck_assert_int_eq(detect("", &h, bad[i], err), -1);
		ck_assert_msg(strstr(err, "parent name") != NULL, "%s", err);
	}
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("cgroup");
	TCase *tc = tcase_create("detect");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, v2_with_controllers);
	tcase_add_test(tc, hybrid_falls_back_to_v1);
	tcase_add_test(tc, v2_delegated_goes_inside_its_own_cgroup);
	tcase_add_test(tc, v2_holder_unit_holds_the_vms);
	tcase_add_test(tc, v1_ignores_delegation);
	tcase_add_test(tc, v1_tracks_vms_in_the_holder);
	tcase_add_test(tc, cpuset_alone_is_not_cpu);
	tcase_add_test(tc, nothing_usable_names_what_is_missing);
	tcase_add_test(tc, parent_name_is_one_plain_component);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(suite());
}
