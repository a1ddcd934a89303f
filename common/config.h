/*
 * Typed, validated INI configuration for every mcpvm process.  A table of
 * keys says where each value goes, its type, range and default; the parser
 * (libinih underneath) refuses unknown sections and keys, bad values,
 * repeated keys and missing required keys with "file:line: message".
 * The concrete mcpvm settings live in conf.h; this is the engine.
 */
#ifndef MCPVM_CONFIG_H
#define MCPVM_CONFIG_H

#include <stddef.h>

enum cfg_type {
	CFG_STRING,	/* char * */
	CFG_PATH,	/* char *, absolute path */
	CFG_INT,	/* long long, within [min, max] */
	CFG_BOOL,	/* int: yes/no, true/false, on/off, 1/0 */
	CFG_ENUM,	/* int: index into choices */
	CFG_LIST,	/* struct cfg_list: whitespace/comma separated words;
			   a repeated key appends */
};

#define CFG_REQUIRED	0x1u

struct cfg_list {
	char	**v;
	size_t	  n;
};

struct cfg_key {
	const char		*name;
	enum cfg_type		 type;
	size_t			 offset;	/* in the section's struct */
	unsigned int		 flags;
	const char		*def;		/* NULL: no default */
	long long		 min, max;	/* CFG_INT */
	const char *const	*choices;	/* CFG_ENUM, NULL-terminated */
	const char		*doc;		/* one line for the reference */
};

/*
 * A section: "[name]" once, or with `multi`, "[name ID]" any number of
 * times, each instance a struct of `size` bytes appended to an array.
 * Defaults may say ${runtime_dir} or ${state_dir}: they are expanded from
 * the [paths] values once the whole file is read.
 */
struct cfg_section {
	const char		*name;
	const struct cfg_key	*keys;
	size_t			 nkeys;
	size_t			 offset;	/* of the struct, or of the
						   struct cfg_array when multi */
	int			 multi;
	size_t			 size;		/* multi: one instance */
	size_t			 id_offset;	/* multi: char * for the ID */
	/* multi: validates an instance's ID; returns a message or NULL */
	const char		*(*check_id)(const char *);
};

struct cfg_array {
	void	*v;
	size_t	 n;
};

struct cfg_schema {
	const struct cfg_section	*sections;
	size_t				 nsections;
	/* Where ${runtime_dir} and ${state_dir} come from, in the result. */
	size_t				 runtime_dir_offset;
	size_t				 state_dir_offset;
};

/*
 * Parses `path` into `out` (zeroed by the caller).  Returns 0, or -1 with a
 * "file:line: message" in err.  A missing file is an error.
 */
int	cfg_parse_file(const struct cfg_schema *, const char *path, void *out,
	    char *err, size_t errlen);
/* The same for text in memory; `name` stands for the file in messages. */
int	cfg_parse_string(const struct cfg_schema *, const char *name,
	    const char *text, void *out, char *err, size_t errlen);
/* Frees every string and list the parser allocated in out. */
void	cfg_free(const struct cfg_schema *, void *out);

#endif
