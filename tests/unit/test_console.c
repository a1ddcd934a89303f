/*
 * Unit tests for vmproxy's console drain (vmproxy/console.c): whatever the
 * sizes of the writes, console.log holds exactly the newest bytes written,
 * in order, and never more than max of them; and bytes from QEMU's pipe
 * reach the file through the event loop.
 */
#include <check.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "console.h"
#include "../check_run.h"

#define MAX	4096

static int
tmpfile_fd(void)
{
	char path[] = "/tmp/mcpvm-console-XXXXXX";
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	unlink(path);
	return fd;
}

static void
check_file(int fd, const uint8_t *all, size_t total, size_t size)
{
	uint8_t *got = malloc(size + 1);
	off_t end = lseek(fd, 0, SEEK_END);

	ck_assert_int_eq((long long)end, (long long)size);
	ck_assert_int_eq(pread(fd, got, size, 0), (ssize_t)size);
	ck_assert_int_eq(memcmp(got, all + total - size, size), 0);
	free(got);
}

START_TEST(keeps_the_newest_bytes_in_order)
{
	size_t cap = 1 << 20, total = 0;
	uint8_t *all = malloc(cap);
	int fd = tmpfile_fd(), p[2];
	struct console *c;

	ck_assert_int_eq(pipe(p), 0);
	ck_assert_ptr_nonnull(c = console_new(NULL, p[0], fd, MAX));
	srandom(7);
	while (total < cap - 3 * MAX) {
		/* From one byte to more than the whole bound at once. */
		size_t n = (size_t)random() % (random() % 4 ? 300 : 3 * MAX) + 1;

		for (size_t i = 0; i < n; i++)
			all[total + i] = (uint8_t)random();
		ck_assert_int_eq(console_append(c, all + total, n), 0);
		total += n;
		ck_assert_uint_le(console_size(c), MAX);
		if (total <= MAX)
			ck_assert_uint_eq(console_size(c), total);
		else
			ck_assert_uint_ge(console_size(c), MAX / 2);
		check_file(fd, all, total, console_size(c));
	}
	console_free(c);
	close(p[1]);
	free(all);
}
END_TEST

START_TEST(drains_the_pipe)
{
	struct event_base *base = event_base_new();
	struct timeval tick = { 0, 20000 };
	uint8_t buf[3000], *all = malloc(sizeof(buf) * 8);
	int fd = tmpfile_fd(), p[2];
	struct console *c;

	ck_assert_int_eq(pipe(p), 0);
	ck_assert_ptr_nonnull(c = console_new(base, p[0], fd, MAX));
	for (int round = 0; round < 8; round++) {
		memset(buf, 'a' + round, sizeof(buf));
		memcpy(all + round * sizeof(buf), buf, sizeof(buf));
		ck_assert_int_eq(write(p[1], buf, sizeof(buf)),
		    (ssize_t)sizeof(buf));
		event_base_loopexit(base, &tick);
		event_base_dispatch(base);
	}
	ck_assert_uint_le(console_size(c), MAX);
	check_file(fd, all, sizeof(buf) * 8, console_size(c));
	close(p[1]);
	console_free(c);
	event_base_free(base);
	free(all);
}
END_TEST

START_TEST(refuses_a_bound_below_two)
{
	ck_assert_ptr_null(console_new(NULL, -1, -1, 1));
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("console");
	TCase *tc = tcase_create("bound");

	tcase_add_test(tc, keeps_the_newest_bytes_in_order);
	tcase_add_test(tc, drains_the_pipe);
	tcase_add_test(tc, refuses_a_bound_below_two);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(suite());
}
