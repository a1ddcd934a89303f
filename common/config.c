/*
 * The configuration engine behind every mcpvm process: INI text through
 * libinih into typed structs described by a cfg_schema.  See config.h.
 *
 * libinih does the lexing; we feed it through our own line reader so that
 * we know the line of every key and see section headers (even empty ones)
 * as they come.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

#include "config.h"

struct cfg_state {
	const struct cfg_schema	 *schema;
	void			 *out;
	const char		 *file;
	const char		 *text;		/* remaining input */
	int			  line;
	char			 *err;
	size_t			  errlen;
	int			  failed;

	/* The section being read, and the struct its keys go into. */
	const struct cfg_section *sec;
	void			 *base;
	int			 *seen;		/* line each key was set on */
	int			  sec_line;
	int			 *sec_seen;	/* per single section: line */

	/* Every instance read so far, to check and default at the end. */
	struct cfg_inst {
		const struct cfg_section *sec;
		void			 *base;		/* single */
		size_t			  index;	/* multi: in the array */
		int			 *seen;
		int			  line;
	}			 *insts;
	size_t			  ninsts;
};

static void __attribute__((format(printf, 3, 4)))
cfg_error(struct cfg_state *st, int line, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (st->failed)
		return;	/* the first error is the one to fix */
	st->failed = 1;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (line > 0)
		snprintf(st->err, st->errlen, "%s:%d: %s", st->file, line, msg);
	else
		snprintf(st->err, st->errlen, "%s: %s", st->file, msg);
}

static char *
trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' ||
	    e[-1] == '\r'))
		*--e = '\0';
	return s;
}

static const struct cfg_section *
cfg_find_section(const struct cfg_schema *sch, const char *name)
{
	for (size_t i = 0; i < sch->nsections; i++)
		if (strcmp(sch->sections[i].name, name) == 0)
			return &sch->sections[i];
	return NULL;
}

/* A "[name]" or "[name ID]" header on `line`. */
static void
cfg_section_begin(struct cfg_state *st, char *hdr)
{
	const struct cfg_section *sec;
	struct cfg_inst *inst;
	char *id = NULL, *sp;
	void *base;

	if ((sp = strpbrk(hdr, " \t")) != NULL) {
		*sp = '\0';
		id = trim(sp + 1);
	}
	st->sec = NULL;
	if ((sec = cfg_find_section(st->schema, hdr)) == NULL) {
		cfg_error(st, st->line, "unknown section [%s]", hdr);
		return;
	}
	if (!sec->multi) {
		size_t idx = (size_t)(sec - st->schema->sections);

		if (id != NULL) {
			cfg_error(st, st->line, "section [%s] takes no name",
			    hdr);
			return;
		}
		if (st->sec_seen[idx] != 0) {
			cfg_error(st, st->line, "section [%s] repeated (first "
			    "at line %d)", hdr, st->sec_seen[idx]);
			return;
		}
		st->sec_seen[idx] = st->line;
		base = (char *)st->out + sec->offset;
	} else {
		struct cfg_array *arr = (void *)((char *)st->out + sec->offset);
		const char *why;
		void *nv;

		if (id == NULL || *id == '\0') {
			cfg_error(st, st->line, "section [%s] needs a name: "
			    "[%s ID]", hdr, hdr);
			return;
		}
		if (sec->check_id != NULL && (why = sec->check_id(id)) != NULL) {
			cfg_error(st, st->line, "[%s %s]: %s", hdr, id, why);
			return;
		}
		for (size_t i = 0; i < arr->n; i++) {
			char **other = (void *)((char *)arr->v + i * sec->size +
			    sec->id_offset);

			if (strcmp(*other, id) == 0) {
				cfg_error(st, st->line, "section [%s %s] "
				    "repeated", hdr, id);
				return;
			}
		}
		if ((nv = realloc(arr->v, (arr->n + 1) * sec->size)) == NULL) {
			cfg_error(st, st->line, "out of memory");
			return;
		}
		arr->v = nv;
		base = (char *)arr->v + arr->n * sec->size;
		memset(base, 0, sec->size);
		arr->n++;
		if ((*(char **)((char *)base + sec->id_offset) = strdup(id)) ==
		    NULL) {
			cfg_error(st, st->line, "out of memory");
			return;
		}
	}
	inst = realloc(st->insts, (st->ninsts + 1) * sizeof(*st->insts));
	if (inst == NULL) {
		cfg_error(st, st->line, "out of memory");
		return;
	}
	st->insts = inst;
	inst = &st->insts[st->ninsts++];
	inst->sec = sec;
	inst->line = st->line;
	/* Bases of multi instances move with realloc: keep the index. */
	inst->base = base;
	if (sec->multi)
		inst->index = ((struct cfg_array *)(void *)((char *)st->out +
		    sec->offset))->n - 1;
	if ((inst->seen = calloc(sec->nkeys ? sec->nkeys : 1,
	    sizeof(int))) == NULL) {
		cfg_error(st, st->line, "out of memory");
		return;
	}
	st->sec = sec;
	st->base = base;
	st->seen = inst->seen;
	st->sec_line = st->line;
}

/* ini_reader: hands libinih one line at a time and watches headers. */
static char *
cfg_reader(char *buf, int size, void *arg)
{
	struct cfg_state *st = arg;
	const char *nl;
	size_t n;
	char *t;

	if (*st->text == '\0')
		return NULL;
	nl = strchr(st->text, '\n');
	n = nl != NULL ? (size_t)(nl - st->text) + 1 : strlen(st->text);
	if (n >= (size_t)size) {
		/* libinih would split it and lose count of lines. */
		cfg_error(st, st->line + 1, "line longer than %d bytes",
		    size - 1);
		n = (size_t)size - 1;
	}
	memcpy(buf, st->text, n);
	buf[n] = '\0';
	st->text += n;
	st->line++;

	if (!st->failed) {
		char *copy = strdup(buf);

		if (copy == NULL) {
			cfg_error(st, st->line, "out of memory");
			return buf;
		}
		t = trim(copy);
		if (*t == '[') {
			char *end = strchr(t, ']');

			if (end == NULL)
				cfg_error(st, st->line, "section header "
				    "without ']'");
			else {
				*end = '\0';
				cfg_section_begin(st, trim(t + 1));
			}
		}
		free(copy);
	}
	return buf;
}

static int
cfg_parse_bool(const char *v, int *out)
{
	static const char *const yes[] = { "yes", "true", "on", "1" };
	static const char *const no[] = { "no", "false", "off", "0" };

	for (size_t i = 0; i < 4; i++) {
		if (strcmp(v, yes[i]) == 0) {
			*out = 1;
			return 0;
		}
		if (strcmp(v, no[i]) == 0) {
			*out = 0;
			return 0;
		}
	}
	return -1;
}

static int
cfg_list_add(struct cfg_list *l, const char *v)
{
	char *copy, *tok, *save = NULL;

	if ((copy = strdup(v)) == NULL)
		return -1;
	for (tok = strtok_r(copy, " \t,", &save); tok != NULL;
	    tok = strtok_r(NULL, " \t,", &save)) {
		char **nv = realloc(l->v, (l->n + 2) * sizeof(*l->v));

		if (nv == NULL)
			goto fail;
		l->v = nv;
		if ((l->v[l->n] = strdup(tok)) == NULL)
			goto fail;
		l->v[++l->n] = NULL;
	}
	free(copy);
	return 0;
 fail:
	free(copy);
	return -1;
}

/* Stores value v for key k into base; returns an error message or NULL. */
static const char *
cfg_store(const struct cfg_key *k, void *base, const char *v, char *buf,
    size_t buflen)
{
	void *dst = (char *)base + k->offset;

	switch (k->type) {
	case CFG_PATH:
		if (v[0] != '/') {
			snprintf(buf, buflen, "%s: '%s' is not an absolute "
			    "path", k->name, v);
			return buf;
		}
		/* FALLTHROUGH */
	case CFG_STRING: {
		char **s = dst;

		free(*s);
		if ((*s = strdup(v)) == NULL)
			return "out of memory";
		return NULL;
	}
	case CFG_INT: {
		long long n;
		char *end;

		errno = 0;
		n = strtoll(v, &end, 10);
		if (*v == '\0' || *end != '\0' || errno == ERANGE) {
			snprintf(buf, buflen, "%s: '%s' is not a whole number",
			    k->name, v);
			return buf;
		}
		if (n < k->min || n > k->max) {
			snprintf(buf, buflen, "%s: %lld is out of range "
			    "%lld..%lld", k->name, n, k->min, k->max);
			return buf;
		}
		*(long long *)dst = n;
		return NULL;
	}
	case CFG_BOOL:
		if (cfg_parse_bool(v, dst) == -1) {
			snprintf(buf, buflen, "%s: '%s' is not yes or no",
			    k->name, v);
			return buf;
		}
		return NULL;
	case CFG_ENUM: {
		size_t off = 0;
		int i;

		for (i = 0; k->choices[i] != NULL; i++)
			if (strcmp(k->choices[i], v) == 0) {
				*(int *)dst = i;
				return NULL;
			}
		off = (size_t)snprintf(buf, buflen, "%s: '%s' is not one of",
		    k->name, v);
		for (i = 0; k->choices[i] != NULL && off < buflen; i++)
			off += (size_t)snprintf(buf + off, buflen - off, " %s",
			    k->choices[i]);
		return buf;
	}
	case CFG_LIST:
		if (cfg_list_add(dst, v) == -1)
			return "out of memory";
		return NULL;
	}
	return "unknown key type";
}

static int
cfg_handler(void *arg, const char *section, const char *name,
    const char *value)
{
	struct cfg_state *st = arg;
	const struct cfg_key *k = NULL;
	const char *why;
	char buf[512];
	size_t i;

	if (st->failed)
		return 1;
	if (st->sec == NULL) {
		if (*section == '\0')
			cfg_error(st, st->line, "key '%s' before any section",
			    name);
		/* else: the header was refused, and said so already */
		return 1;
	}
	for (i = 0; i < st->sec->nkeys; i++)
		if (strcmp(st->sec->keys[i].name, name) == 0) {
			k = &st->sec->keys[i];
			break;
		}
	if (k == NULL) {
		cfg_error(st, st->line, "unknown key '%s' in [%s]", name,
		    st->sec->name);
		return 1;
	}
	if (st->seen[i] != 0 && k->type != CFG_LIST) {
		cfg_error(st, st->line, "%s: set twice (first at line %d)",
		    name, st->seen[i]);
		return 1;
	}
	if ((why = cfg_store(k, st->base, value, buf, sizeof(buf))) != NULL) {
		cfg_error(st, st->line, "%s", why);
		return 1;
	}
	st->seen[i] = st->line;
	return 1;
}

/* Expands ${runtime_dir} and ${state_dir} in a default. */
static int
cfg_expand(const struct cfg_state *st, const char *def, char *buf,
    size_t buflen)
{
	static const struct { const char *var; int which; } vars[] = {
		{ "${runtime_dir}", 0 }, { "${state_dir}", 1 },
	};
	size_t off = 0;

	while (*def != '\0') {
		size_t i;

		for (i = 0; i < 2; i++) {
			size_t vl = strlen(vars[i].var);
			const char *val;

			if (strncmp(def, vars[i].var, vl) != 0)
				continue;
			val = *(char **)((char *)st->out + (vars[i].which == 0 ?
			    st->schema->runtime_dir_offset :
			    st->schema->state_dir_offset));
			if (val == NULL)
				return -1;
			if (off + strlen(val) >= buflen)
				return -1;
			memcpy(buf + off, val, strlen(val));
			off += strlen(val);
			def += vl;
			break;
		}
		if (i == 2) {
			if (off + 1 >= buflen)
				return -1;
			buf[off++] = *def++;
		}
	}
	buf[off] = '\0';
	return 0;
}

/* Applies defaults to an instance and checks its required keys. */
static void
cfg_finish(struct cfg_state *st, const struct cfg_section *sec, void *base,
    const int *seen, int line, const char *id)
{
	char label[128], val[PATH_MAX], buf[512];

	if (id != NULL)
		snprintf(label, sizeof(label), "[%s %s]", sec->name, id);
	else
		snprintf(label, sizeof(label), "[%s]", sec->name);
	for (size_t i = 0; i < sec->nkeys && !st->failed; i++) {
		const struct cfg_key *k = &sec->keys[i];
		const char *why;

		if (seen != NULL && seen[i] != 0)
			continue;
		if (k->flags & CFG_REQUIRED) {
			cfg_error(st, line, "%s: missing required key '%s'",
			    label, k->name);
			return;
		}
		if (k->def == NULL)
			continue;
		if (cfg_expand(st, k->def, val, sizeof(val)) == -1) {
			cfg_error(st, line, "%s: cannot expand default of "
			    "'%s'", label, k->name);
			return;
		}
		if ((why = cfg_store(k, base, val, buf, sizeof(buf))) != NULL)
			cfg_error(st, line, "%s: default %s", label, why);
	}
}

int
cfg_parse_string(const struct cfg_schema *sch, const char *name,
    const char *text, void *out, char *err, size_t errlen)
{
	struct cfg_state st;
	int rc;

	memset(&st, 0, sizeof(st));
	st.schema = sch;
	st.out = out;
	st.file = name;
	st.text = text;
	st.err = err;
	st.errlen = errlen;
	if ((st.sec_seen = calloc(sch->nsections, sizeof(int))) == NULL) {
		snprintf(err, errlen, "%s: out of memory", name);
		return -1;
	}
	if (strlen(text) != 0 && memchr(text, '\0', strlen(text)) != NULL)
		cfg_error(&st, 0, "file contains a NUL byte");
	rc = ini_parse_stream(cfg_reader, &st, cfg_handler, &st);
	if (rc != 0 && !st.failed)
		cfg_error(&st, rc > 0 ? rc : 0, "syntax error (expected "
		    "'key = value' or '[section]')");

	/* Sections that never appeared still get their defaults: [paths]
	 * first, since other defaults expand its values. */
	for (int pass = 0; pass < 2 && !st.failed; pass++)
		for (size_t i = 0; i < sch->nsections && !st.failed; i++) {
			const struct cfg_section *sec = &sch->sections[i];
			int is_paths = strcmp(sec->name, "paths") == 0;

			if (sec->multi || (pass == 0) != is_paths)
				continue;
			if (st.sec_seen[i] != 0) {
				for (size_t j = 0; j < st.ninsts; j++)
					if (st.insts[j].sec == sec)
						cfg_finish(&st, sec,
						    st.insts[j].base,
						    st.insts[j].seen,
						    st.insts[j].line, NULL);
			} else
				cfg_finish(&st, sec, (char *)out + sec->offset,
				    NULL, 0, NULL);
		}
	for (size_t j = 0; j < st.ninsts && !st.failed; j++) {
		const struct cfg_section *sec = st.insts[j].sec;
		struct cfg_array *arr;
		void *base;

		if (!sec->multi)
			continue;
		arr = (void *)((char *)out + sec->offset);
		base = (char *)arr->v + st.insts[j].index * sec->size;
		cfg_finish(&st, sec, base, st.insts[j].seen, st.insts[j].line,
		    *(char **)((char *)base + sec->id_offset));
	}

	for (size_t j = 0; j < st.ninsts; j++)
		free(st.insts[j].seen);
	free(st.insts);
	free(st.sec_seen);
	return st.failed ? -1 : 0;
}

int
cfg_parse_file(const struct cfg_schema *sch, const char *path, void *out,
    char *err, size_t errlen)
{
	FILE *f;
	char *text = NULL;
	size_t len = 0;
	int rc;

	if ((f = fopen(path, "re")) == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	/* Configuration files are small; refuse one that is not. */
	text = malloc(1024 * 1024 + 1);
	if (text == NULL) {
		fclose(f);
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	len = fread(text, 1, 1024 * 1024 + 1, f);
	if (ferror(f) || len > 1024 * 1024) {
		snprintf(err, errlen, "%s: %s", path, ferror(f) ?
		    strerror(errno) : "larger than 1 MiB");
		fclose(f);
		free(text);
		return -1;
	}
	fclose(f);
	text[len] = '\0';
	if (strlen(text) != len) {
		snprintf(err, errlen, "%s: file contains a NUL byte", path);
		free(text);
		return -1;
	}
	rc = cfg_parse_string(sch, path, text, out, err, errlen);
	free(text);
	return rc;
}

static void
cfg_free_keys(const struct cfg_section *sec, void *base)
{
	for (size_t i = 0; i < sec->nkeys; i++) {
		const struct cfg_key *k = &sec->keys[i];
		void *dst = (char *)base + k->offset;

		if (k->type == CFG_STRING || k->type == CFG_PATH) {
			free(*(char **)dst);
			*(char **)dst = NULL;
		} else if (k->type == CFG_LIST) {
			struct cfg_list *l = dst;

			for (size_t j = 0; j < l->n; j++)
				free(l->v[j]);
			free(l->v);
			l->v = NULL;
			l->n = 0;
		}
	}
}

void
cfg_free(const struct cfg_schema *sch, void *out)
{
	for (size_t i = 0; i < sch->nsections; i++) {
		const struct cfg_section *sec = &sch->sections[i];

		if (!sec->multi) {
			cfg_free_keys(sec, (char *)out + sec->offset);
			continue;
		}
		{
			struct cfg_array *arr = (void *)((char *)out +
			    sec->offset);

			for (size_t j = 0; j < arr->n; j++) {
				void *base = (char *)arr->v + j * sec->size;

				cfg_free_keys(sec, base);
				free(*(char **)((char *)base + sec->id_offset));
			}
			free(arr->v);
			arr->v = NULL;
			arr->n = 0;
		}
	}
}
