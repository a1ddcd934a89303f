/*
 * Unit tests for vmmd/preflight: each check passes and fails for the right
 * reason with a message that says what to do, against files the test
 * writes (a passwd, images, fake QEMU binaries) and the installed QEMU.
 */
#include <sys/stat.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preflight.h"
#include "../check_run.h"

static char dir[] = "/tmp/mcpvm-pf-XXXXXX";
static char path[512];

static void
setup(void)
{
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void
teardown(void)
{
	const char *names[] = { "passwd", "image", "qemu-old", "qemu-junk",
	    NULL };
	int i;

	for (i = 0; names[i] != NULL; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
}

static const char *
write_file(const char *name, const char *content, mode_t mode)
{
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(content, f);
	fclose(f);
	ck_assert_int_eq(chmod(path, mode), 0);
	return path;
}

START_TEST(parses_qemu_versions)
{
	int a, b, c;

	ck_assert_int_eq(pf_parse_qemu_version("QEMU emulator version 7.2.22 "
	    "(Debian 1:7.2+dfsg-7+deb12u18+b3)\nCopyright", &a, &b, &c), 0);
	ck_assert(a == 7 && b == 2 && c == 22);
	ck_assert_int_eq(pf_parse_qemu_version("QEMU emulator version 9.1\n",
	    &a, &b, &c), 0);
	ck_assert(a == 9 && b == 1 && c == 0);
	ck_assert_int_eq(pf_parse_qemu_version("nothing here", &a, &b, &c),
	    -1);
	ck_assert_int_eq(pf_parse_qemu_version("version x", &a, &b, &c), -1);
	ck_assert_int_eq(pf_parse_qemu_version("version 7", &a, &b, &c), -1);
}
END_TEST

START_TEST(qemu_check)
{
	struct pf_result r;
	char bin[512];

	pf_check_qemu("/usr/bin/qemu-system-x86_64", &r);
	if (access("/usr/bin/qemu-system-x86_64", X_OK) == 0) {
		ck_assert_msg(r.ok, "%s", r.msg);
		ck_assert_msg(strstr(r.msg, "is QEMU 7.") != NULL ||
		    strstr(r.msg, "is QEMU ") != NULL, "%s", r.msg);
	}
	snprintf(bin, sizeof(bin), "%s", write_file("qemu-old", "#!/bin/sh\n"
	    "echo 'QEMU emulator version 6.2.0'\n", 0755));
	pf_check_qemu(bin, &r);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_msg(strstr(r.msg, "6.2.0; 7.2 or later is needed") != NULL,
	    "%s", r.msg);
	snprintf(bin, sizeof(bin), "%s", write_file("qemu-junk", "#!/bin/sh\n"
	    "exit 3\n", 0755));
	pf_check_qemu(bin, &r);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_msg(strstr(r.msg, "status 3") != NULL, "%s", r.msg);
	pf_check_qemu("/nonexistent/qemu", &r);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_msg(strstr(r.msg, "install qemu-system-x86") != NULL, "%s",
	    r.msg);
}
END_TEST

START_TEST(uid_range)
{
	struct pf_result r;
	const char *pw = write_file("passwd",
	    "root:x:0:0:root:/root:/bin/bash\n"
	    "nopw::5000:5000::/:/bin/sh\n"
	    "user:x:1000:1000:User:/home/user:/bin/bash\n"
	    "broken line without fields\n"
	    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
	    0644);

	pf_check_uids(pw, 200000, 256, &r);
	ck_assert_msg(r.ok, "%s", r.msg);
	pf_check_uids(pw, 65000, 1000, &r);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_msg(strstr(r.msg, "uid 65534 (nobody)") != NULL &&
	    strstr(r.msg, "65000-65999") != NULL, "%s", r.msg);
	/* An empty password field must not shift the uid column. */
	pf_check_uids(pw, 4990, 20, &r);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_msg(strstr(r.msg, "uid 5000 (nopw)") != NULL, "%s", r.msg);
	/* The range may never reach root or wrap. */
	pf_check_uids(pw, 0, 10, &r);
	ck_assert_int_eq(r.ok, 0);
	pf_check_uids(pw, 4294967200U, 1000, &r);
	ck_assert_int_eq(r.ok, 0);
}
END_TEST

START_TEST(digests)
{
	struct pf_result r;
	struct pf_file f;
	char hex[65], err[256];
	/* sha256("hello\n") */
	const char *want =
	    "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";

	f.label = "image default rootfs";
	f.path = write_file("image", "hello\n", 0644);
	ck_assert_int_eq(pf_sha256_file(f.path, hex, err, sizeof(err)), 0);
	ck_assert_str_eq(hex, want);
	f.sha256 = want;
	pf_check_digest(&f, &r);
	ck_assert_msg(r.ok, "%s", r.msg);
	/* Case does not matter in the pin. */
	f.sha256 =
	    "5891B5B522D5DF086D0FF0B110FBD9D21BB4FC7163AF34D08286A2E846F6BE03";
	pf_check_digest(&f, &r);
	ck_assert_msg(r.ok, "%s", r.msg);
	f.sha256 =
	    "0000000000000000000000000000000000000000000000000000000000000000";
	pf_check_digest(&f, &r);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_msg(strstr(r.msg, want) != NULL &&
	    strstr(r.msg, "changed or the pin is wrong") != NULL, "%s", r.msg);
	f.sha256 = "abc";
	pf_check_digest(&f, &r);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_msg(strstr(r.msg, "64 hex digits") != NULL, "%s", r.msg);
	f.sha256 = want;
	f.path = "/nonexistent/rootfs";
	pf_check_digest(&f, &r);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_msg(strstr(r.msg, "No such file") != NULL, "%s", r.msg);
}
END_TEST

START_TEST(space)
{
	struct pf_result r;

	pf_check_space(dir, 1, &r);
	ck_assert_msg(r.ok, "%s", r.msg);
	pf_check_space(dir, UINT64_MAX, &r);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_msg(strstr(r.msg, "MiB needed") != NULL, "%s", r.msg);
}
END_TEST

START_TEST(whole_run_counts_failures)
{
	struct pf_report rep;
	struct pf_file files[1];
	struct pf_conf c = { 0 };
	const char *want =
	    "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";
	char img[512];
	size_t i, failed = 0;
	int n;

	snprintf(img, sizeof(img), "%s", write_file("image", "hello\n", 0644));
	files[0].label = "image default rootfs";
	files[0].path = img;
	files[0].sha256 = want;
	c.qemu_binary = "/nonexistent/qemu";
	c.state_dir = dir;
	c.min_free_bytes = 1;
	c.uid_base = 300000;
	c.uid_count = 64;
	c.passwd = "/etc/passwd";
	c.cgroup_parent = "mcpvm";
	c.files = files;
	c.nfiles = 1;
	n = preflight_run(&c, &rep);
	ck_assert_uint_eq(rep.n, 7);
	for (i = 0; i < rep.n; i++) {
		ck_assert(rep.r[i].name[0] != '\0' && rep.r[i].msg[0] != '\0');
		failed += !rep.r[i].ok;
	}
	ck_assert_int_eq(n, (int)failed);
	ck_assert_uint_eq(rep.failed, failed);
	ck_assert_str_eq(rep.r[1].name, "qemu");
	ck_assert_int_eq(rep.r[1].ok, 0);
	ck_assert_str_eq(rep.r[6].name, "digest");
	ck_assert_int_eq(rep.r[6].ok, 1);
	preflight_free(&rep);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("preflight");
	TCase *tc = tcase_create("checks");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, parses_qemu_versions);
	tcase_add_test(tc, qemu_check);
	tcase_add_test(tc, uid_range);
	tcase_add_test(tc, digests);
	tcase_add_test(tc, space);
	tcase_add_test(tc, whole_run_counts_failures);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(suite());
}
