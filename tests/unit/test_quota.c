/*
 * Unit tests for vmmd/quota.c's decisions: the limit of a VM's project
 * and what storage_quota does on each kind of volume.  The project and
 * subvolume calls themselves run on real XFS and btrfs volumes
 * (tests/integration/test_disk_xfs.c, test_disk_btrfs.c) and the limits
 * in the vmmd suite.
 */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "conf.h"
#include "quota.h"
#include "../check_run.h"

#define MIB	(1024ULL * 1024)

START_TEST(slot_bytes_cover_files_memory_and_margin)
{
	/* 2 GiB of files, 1 GiB of memory: each plus 1/256, plus 64 MiB. */
	ck_assert_uint_eq(quota_slot_bytes(2048 * MIB, 1024),
	    2048 * MIB + 1024 * MIB + 8 * MIB + 4 * MIB + 64 * MIB);
	/* One VM never has more than tools.json's 16 GiB of memory. */
	ck_assert_uint_eq(quota_slot_bytes(0, 1LL << 30),
	    quota_slot_bytes(0, QUOTA_VM_MEMORY_MAX_MIB));
	ck_assert_uint_eq(quota_slot_bytes(0, -5), 64 * MIB);
}
END_TEST

START_TEST(decide_by_mode_and_volume)
{
	char msg[512];

	ck_assert_int_eq(quota_decide(CONF_QUOTA_AUTO, "xfs", 0, "/v", msg,
	    sizeof(msg)), QUOTA_ENFORCE);
	ck_assert_int_eq(quota_decide(CONF_QUOTA_REQUIRE, "xfs", 0, "/v", msg,
	    sizeof(msg)), QUOTA_ENFORCE);
	/* off: nothing probed, nothing said. */
	ck_assert_int_eq(quota_decide(CONF_QUOTA_OFF, "xfs", ENOTSUP, "/v",
	    msg, sizeof(msg)), QUOTA_WITHOUT);
	ck_assert_str_eq(msg, "");

	ck_assert_int_eq(quota_decide(CONF_QUOTA_AUTO, "xfs", ENOTSUP, "/v",
	    msg, sizeof(msg)), QUOTA_WITHOUT);
	ck_assert_msg(strstr(msg, "/v is on XFS mounted without project "
	    "quotas: add the mount option prjquota") != NULL, "%s", msg);
	ck_assert_int_eq(quota_decide(CONF_QUOTA_REQUIRE, "xfs", ENOTSUP,
	    "/v", msg, sizeof(msg)), QUOTA_REFUSE);
	ck_assert_msg(strstr(msg, "prjquota") != NULL, "%s", msg);

	ck_assert_int_eq(quota_decide(CONF_QUOTA_AUTO, "xfs", ENOSYS, "/v",
	    msg, sizeof(msg)), QUOTA_WITHOUT);
	ck_assert_msg(strstr(msg, "CONFIG_XFS_QUOTA") != NULL &&
	    strstr(msg, "prjquota") != NULL, "%s", msg);

	/* btrfs: quotas not enabled (the probe's ENOTSUP) say how to. */
	ck_assert_int_eq(quota_decide(CONF_QUOTA_AUTO, "btrfs", 0, "/v", msg,
	    sizeof(msg)), QUOTA_ENFORCE);
	ck_assert_int_eq(quota_decide(CONF_QUOTA_AUTO, "btrfs", ENOTSUP, "/v",
	    msg, sizeof(msg)), QUOTA_WITHOUT);
	ck_assert_msg(strstr(msg, "/v is on btrfs without quotas: run `btrfs "
	    "quota enable`") != NULL, "%s", msg);
	ck_assert_int_eq(quota_decide(CONF_QUOTA_REQUIRE, "btrfs", ENOTSUP,
	    "/v", msg, sizeof(msg)), QUOTA_REFUSE);
	ck_assert_msg(strstr(msg, "btrfs quota enable") != NULL, "%s", msg);
	/* A kernel that refuses the subvolume's limit. */
	ck_assert_int_eq(quota_decide(CONF_QUOTA_REQUIRE, "btrfs", EPERM,
	    "/v", msg, sizeof(msg)), QUOTA_REFUSE);
	ck_assert_msg(strstr(msg, "subvolume with a qgroup limit cannot be "
	    "made there") != NULL && strstr(msg, strerror(EPERM)) != NULL,
	    "%s", msg);
	/* Neither XFS nor btrfs. */
	ck_assert_int_eq(quota_decide(CONF_QUOTA_AUTO, "ext4", ENOSYS, "/v",
	    msg, sizeof(msg)), QUOTA_WITHOUT);
	ck_assert_msg(strstr(msg, "/v is on ext4, where vmmd sets no per-VM "
	    "limit (only XFS project quotas and btrfs qgroups") != NULL, "%s",
	    msg);
	ck_assert_int_eq(quota_decide(CONF_QUOTA_REQUIRE, "ext4", ENOSYS,
	    "/v", msg, sizeof(msg)), QUOTA_REFUSE);

	ck_assert_int_eq(quota_decide(CONF_QUOTA_AUTO, "xfs", EACCES, "/v",
	    msg, sizeof(msg)), QUOTA_WITHOUT);
	ck_assert_msg(strstr(msg, strerror(EACCES)) != NULL, "%s", msg);
}
END_TEST

START_TEST(probe_of_a_missing_dir)
{
	ck_assert_int_eq(quota_probe("/nonexistent/mcpvm"), ENOENT);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("quota");
	TCase *tc = tcase_create("decide");

	tcase_add_test(tc, slot_bytes_cover_files_memory_and_margin);
	tcase_add_test(tc, decide_by_mode_and_volume);
	tcase_add_test(tc, probe_of_a_missing_dir);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(suite());
}
