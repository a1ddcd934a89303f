/*
 * Unit tests for common/config (the INI engine) and common/conf (the mcpvm
 * key tables): every error names its file and line.
 */
#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"
#include "config.h"
#include "../check_run.h"

struct t_main {
	char		*name;
	char		*dir;
	long long	 count;
	int		 flag;
	int		 mode;
	struct cfg_list	 words;
};

struct t_item {
	char		*id;
	char		*path;
	long long	 size;
};

struct t_conf {
	struct {
		char	*runtime_dir;
		char	*state_dir;
	}			 paths;
	struct t_main		 main;
	struct cfg_array	 items;
};

static const char *const modes[] = { "hibernate", "pause", NULL };

static const struct cfg_key t_paths_keys[] = {
	{ "runtime_dir", CFG_PATH, 0, 0, "/run/t", 0, 0, NULL, "" },
	{ "state_dir", CFG_PATH, sizeof(char *), 0, "/var/lib/t", 0, 0, NULL,
	    "" },
};

static const struct cfg_key t_main_keys[] = {
	{ "name", CFG_STRING, offsetof(struct t_main, name), CFG_REQUIRED,
	    NULL, 0, 0, NULL, "" },
	{ "dir", CFG_PATH, offsetof(struct t_main, dir), 0,
	    "${state_dir}/sub", 0, 0, NULL, "" },
	{ "count", CFG_INT, offsetof(struct t_main, count), 0, "5", 1, 100,
	    NULL, "" },
	{ "flag", CFG_BOOL, offsetof(struct t_main, flag), 0, "no", 0, 0,
	    NULL, "" },
	{ "mode", CFG_ENUM, offsetof(struct t_main, mode), 0, "hibernate",
	    0, 0, modes, "" },
	{ "words", CFG_LIST, offsetof(struct t_main, words), 0, NULL, 0, 0,
	    NULL, "" },
};

static const struct cfg_key t_item_keys[] = {
	{ "path", CFG_PATH, offsetof(struct t_item, path), CFG_REQUIRED, NULL,
	    0, 0, NULL, "" },
	{ "size", CFG_INT, offsetof(struct t_item, size), 0, "7", 0, 1000,
	    NULL, "" },
};

static const char *
check_item_id(const char *id)
{
	for (const char *c = id; *c != '\0'; c++)
		if (!((*c >= 'a' && *c <= 'z') || *c == '-'))
			return "IDs are lowercase letters and '-'";
	return NULL;
}

static const struct cfg_section t_sections[] = {
	{ "paths", t_paths_keys, 2, offsetof(struct t_conf, paths), 0, 0, 0,
	    NULL },
	{ "main", t_main_keys, 6, offsetof(struct t_conf, main), 0, 0, 0,
	    NULL },
	{ "item", t_item_keys, 2, offsetof(struct t_conf, items), 1,
	    sizeof(struct t_item), offsetof(struct t_item, id),
	    check_item_id },
};

static const struct cfg_schema t_schema = {
	t_sections, 3,
	offsetof(struct t_conf, paths.runtime_dir),
	offsetof(struct t_conf, paths.state_dir),
};

static int
parse(const char *text, struct t_conf *c, char *err, size_t errlen)
{
	memset(c, 0, sizeof(*c));
	err[0] = '\0';
	return cfg_parse_string(&t_schema, "t.conf", text, c, err, errlen);
}

START_TEST(good_file_and_defaults)
{
	struct t_conf c;
	char err[512];
	struct t_item *it;

	ck_assert_int_eq(parse(
	    "# comment\n"
	    "[paths]\n"
	    "state_dir = /tmp/st\n"
	    "\n"
	    "[main]\n"
	    "name = demo ; inline comment\n"
	    "flag = yes\n"
	    "mode = pause\n"
	    "words = a, b\n"
	    "words = c\n"
	    "[item one]\n"
	    "path = /x/one\n"
	    "[item two-b]\n"
	    "path = /x/two\n"
	    "size = 1000\n", &c, err, sizeof(err)), 0);
	ck_assert_str_eq(c.main.name, "demo");
	ck_assert_str_eq(c.main.dir, "/tmp/st/sub");
	ck_assert_str_eq(c.paths.runtime_dir, "/run/t");
	ck_assert_int_eq(c.main.count, 5);
	ck_assert_int_eq(c.main.flag, 1);
	ck_assert_int_eq(c.main.mode, 1);
	ck_assert_uint_eq(c.main.words.n, 3);
	ck_assert_str_eq(c.main.words.v[2], "c");
	ck_assert_ptr_null(c.main.words.v[3]);
	ck_assert_uint_eq(c.items.n, 2);
	it = c.items.v;
	ck_assert_str_eq(it[0].id, "one");
	ck_assert_int_eq(it[0].size, 7);
	ck_assert_str_eq(it[1].id, "two-b");
	ck_assert_str_eq(it[1].path, "/x/two");
	ck_assert_int_eq(it[1].size, 1000);
	cfg_free(&t_schema, &c);
	ck_assert_ptr_null(c.main.name);
	ck_assert_uint_eq(c.items.n, 0);
}
END_TEST

static const struct {
	const char	*text;
	const char	*err;
} bad_cases[] = {
	{ "[main]\nname = x\nbogus = 1\n",
	    "t.conf:3: unknown key 'bogus' in [main]" },
	{ "[main]\nname = x\n[nope]\na = 1\n",
	    "t.conf:3: unknown section [nope]" },
	{ "[main]\nname = x\ncount = 101\n",
	    "t.conf:3: count: 101 is out of range 1..100" },
	{ "[main]\nname = x\ncount = 12abc\n",
	    "t.conf:3: count: '12abc' is not a whole number" },
	{ "[main]\nname = x\ncount = 99999999999999999999999\n",
	    "t.conf:3: count: '99999999999999999999999' is not a whole number" },
	{ "[main]\nname = x\nflag = maybe\n",
	    "t.conf:3: flag: 'maybe' is not yes or no" },
	{ "[main]\nname = x\nmode = sleep\n",
	    "t.conf:3: mode: 'sleep' is not one of hibernate pause" },
	{ "[main]\nname = x\ndir = relative/x\n",
	    "t.conf:3: dir: 'relative/x' is not an absolute path" },
	{ "[main]\nname = x\nname = y\n",
	    "t.conf:3: name: set twice (first at line 2)" },
	{ "[main]\ncount = 3\n",
	    "t.conf:1: [main]: missing required key 'name'" },
	{ "\n\n[main]\nname = x\n[item a]\nsize = 3\n",
	    "t.conf:5: [item a]: missing required key 'path'" },
	{ "[main]\nname = x\n[item]\npath = /a\n",
	    "t.conf:3: section [item] needs a name: [item ID]" },
	{ "[main]\nname = x\n[item Bad]\npath = /a\n",
	    "t.conf:3: [item Bad]: IDs are lowercase letters and '-'" },
	{ "[main]\nname = x\n[item a]\npath = /a\n[item a]\npath = /b\n",
	    "t.conf:5: section [item a] repeated" },
	{ "[main]\nname = x\n[paths]\n[main]\n",
	    "t.conf:4: section [main] repeated (first at line 1)" },
	{ "[main extra]\nname = x\n",
	    "t.conf:1: section [main] takes no name" },
	{ "name = x\n",
	    "t.conf:1: key 'name' before any section" },
	{ "[main]\nname = x\njust words\n",
	    "t.conf:3: syntax error (expected 'key = value' or '[section]')" },
	{ "[main\nname = x\n",
	    "t.conf:1: section header without ']'" },
	{ "[paths]\nstate_dir = nowhere\n[main]\nname = x\n",
	    "t.conf:2: state_dir: 'nowhere' is not an absolute path" },
};

START_TEST(bad_file_says_where)
{
	struct t_conf c;
	char err[512];

	ck_assert_int_eq(parse(bad_cases[_i].text, &c, err, sizeof(err)), -1);
	ck_assert_str_eq(err, bad_cases[_i].err);
	cfg_free(&t_schema, &c);
}
END_TEST

START_TEST(long_line_is_refused)
{
	struct t_conf c;
	char err[512], *text;
	size_t n = 5000;

	text = malloc(n + 32);
	strcpy(text, "[main]\nname = ");
	memset(text + strlen(text), 'x', n);
	strcpy(text + 14 + n, "\n");
	ck_assert_int_eq(parse(text, &c, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "t.conf:2: line longer than"));
	cfg_free(&t_schema, &c);
	free(text);
}
END_TEST

START_TEST(mcpvm_conf_file)
{
	struct mcpvm_conf conf;
	char path[] = "/tmp/mcpvm-conf-XXXXXX";
	char err[512];
	FILE *f;
	int fd;

	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	f = fdopen(fd, "w");
	fputs("[paths]\nruntime_dir = /tmp/r\n", f);
	fclose(f);
	ck_assert_int_eq(conf_load(path, &conf, err, sizeof(err)), 0);
	ck_assert_str_eq(conf.paths.runtime_dir, "/tmp/r");
	ck_assert_str_eq(conf.paths.state_dir, "/var/lib/mcpvm");
	conf_free(&conf);

	f = fopen(path, "w");
	fputs("[paths]\nruntime = /tmp/r\n", f);
	fclose(f);
	ck_assert_int_eq(conf_load(path, &conf, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, ":2: unknown key 'runtime' in "
	    "[paths]"));
	unlink(path);

	ck_assert_int_eq(conf_load(path, &conf, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "No such file or directory"));
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, good_file_and_defaults);
	tcase_add_loop_test(tc, bad_file_says_where, 0,
	    (int)(sizeof(bad_cases) / sizeof(bad_cases[0])));
	tcase_add_test(tc, long_line_is_refused);
	tcase_add_test(tc, mcpvm_conf_file);
	suite_add_tcase(s, tc);
	return check_run(s);
}
