/*
 * Strict JSON for everything mcpvm accepts from a peer: a parser that
 * refuses what RFC 8259 refuses (json-c alone accepts NaN, single quotes,
 * trailing commas in places, huge integers clamped to INT64_MAX) and typed
 * getters that never coerce.  Used by mcpd, vmmd, vmproxy, authd, netd
 * and, through glink, guestd: the one JSON layer.
 */
#ifndef MCPVM_JSONX_H
#define MCPVM_JSONX_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

/* Deepest nesting any caller may ask for; bounds the checker's recursion. */
#define JSONX_DEPTH_LIMIT	64

struct jsonx_err {
	char	msg[256];	/* "$.cursor.stdout: expected integer, got string" */
};

/*
 * Parse exactly buf[0..len) as one JSON value: the text must be valid UTF-8
 * (strict, see utf8.h), contain no NUL byte, follow RFC 8259's grammar
 * (no comments, NaN, leading zeros, raw control characters in strings or
 * unpaired \u surrogate escapes), nest at most max_depth arrays/objects
 * deep (capped at JSONX_DEPTH_LIMIT; the top-level container is depth 1),
 * keep integers within int64 and numbers finite, and have nothing after the
 * value but JSON whitespace.  A key given twice keeps its last value, as
 * json-c does.  Returns a new reference or NULL with err->msg set; a
 * top-level null is refused, since json-c represents it as NULL.
 */
json_object	*jsonx_parse(const char *buf, size_t len, size_t max_depth,
		    struct jsonx_err *err);
/*
 * jsonx_parse for text where a top-level null is a value like any other:
 * 0 with *out a new reference, or NULL when the text was null; -1 with
 * err->msg set (and *out NULL) when it is not JSON jsonx_parse accepts.
 */
int		 jsonx_parse_value(const char *buf, size_t len,
		    size_t max_depth, json_object **out,
		    struct jsonx_err *err);
/* The same, and the top-level value must be an object. */
json_object	*jsonx_parse_object(const char *buf, size_t len,
		    size_t max_depth, struct jsonx_err *err);

/* "integer", "number", "string", "boolean", "null", "object", "array". */
/*
 * jsonx_parse_object's checks without building the object, for text that
 * is passed on rather than read: 0, or -1 with err->msg set.
 */
int		 jsonx_check_object(const char *buf, size_t len,
		    size_t max_depth, struct jsonx_err *err);
/*
 * In text jsonx_check_object accepted, the value of the top-level member
 * named key: its offset and length, and 1; 0 if there is none.  Names are
 * compared as written (an escaped spelling of key is not key), and of a
 * name given twice the last counts, as in jsonx_parse.
 */
int		 jsonx_member_span(const char *buf, size_t len,
		    const char *key, size_t *off, size_t *vlen);

/*
 * The top-level members of an object jsonx_check_object_members accepted,
 * as spans of its text: the first JSONX_MEMBERS_MAX of them, and whether
 * there were more.  Lets a receiver find a member without scanning again.
 */
#define JSONX_MEMBERS_MAX	8
struct jsonx_span {
	size_t		 key_off, key_len;	/* the name, quotes excluded */
	size_t		 off, len;		/* the value */
};
struct jsonx_members {
	size_t			 n;
	int			 overflow;
	struct jsonx_span	 m[JSONX_MEMBERS_MAX];
};
/* jsonx_check_object, also filling *mem (which may be NULL). */
int		 jsonx_check_object_members(const char *buf, size_t len,
		    size_t max_depth, struct jsonx_members *mem,
		    struct jsonx_err *err);
/*
 * jsonx_member_span's answer from what the check recorded; it scans again
 * only when the object had more members than were recorded (or mem is
 * NULL).
 */
int		 jsonx_members_find(const struct jsonx_members *mem,
		    const char *buf, size_t len, const char *key, size_t *off,
		    size_t *vlen);

/*
 * A json-c object that serializes as text (a JSON object checked by the
 * caller, copied here) wherever it is put: passes a peer's object on
 * without building it.  It has no members to look at; read the text.
 */
json_object	*jsonx_raw_object(const char *text, size_t len);

/*
 * A string's contents as json-c writes them with
 * JSON_C_TO_STRING_NOSLASHESCAPE (no quotes around): the length, and the
 * text into out, which has room for jsonx_escaped_len() bytes.
 */
size_t		 jsonx_escaped_len(const char *text, size_t len);
size_t		 jsonx_escape(char *out, const char *text, size_t len);

const char	*jsonx_type_name(json_object *);

/*
 * Typed getters.  key is a member name, or several joined by '.' to reach
 * into nested objects ("cursor.stdout"); every intermediate member that is
 * present must be an object.  Each returns 1 and sets *out when the member
 * is present and well-typed, 0 when it (or an object on the way) is absent
 * and not required (*out untouched), and -1 with err->msg naming the JSON
 * path otherwise.  JSON null is a wrong type, not an absent member.
 *
 * jsonx_get_string refuses strings containing U+0000, which C could not see
 * past; *out points into obj and lives as long as obj does.  jsonx_get_int64 accepts only JSON integers (1.0 and "1" are wrong
 * types) within [min, max].  jsonx_get_enum stores the index into names, a
 * NULL-terminated list.
 */
int	jsonx_get_string(json_object *obj, const char *key, int required,
	    const char **out, struct jsonx_err *err);
int	jsonx_get_int64(json_object *obj, const char *key, int required,
	    int64_t min, int64_t max, int64_t *out, struct jsonx_err *err);
int	jsonx_get_bool(json_object *obj, const char *key, int required,
	    int *out, struct jsonx_err *err);
int	jsonx_get_object(json_object *obj, const char *key, int required,
	    json_object **out, struct jsonx_err *err);
int	jsonx_get_array(json_object *obj, const char *key, int required,
	    json_object **out, struct jsonx_err *err);
int	jsonx_get_enum(json_object *obj, const char *key, int required,
	    const char *const *names, int *out, struct jsonx_err *err);

#endif
