/*
 * The audit log: one JSON line per authorized mutation (time, workspace,
 * tool, VM, outcome; never a credential or a payload), each line carrying
 * the SHA-256 of the previous one.  The last sequence number and hash are
 * also kept in vmmd's database, so that cutting lines off the end is
 * caught as surely as editing, removing or reordering them.
 */
#ifndef MCPVM_VMMD_AUDIT_H
#define MCPVM_VMMD_AUDIT_H

#include <stddef.h>

struct audit;
struct store;

#define AUDIT_HASH_HEX	64

struct audit	*audit_open(const char *path, struct store *, char *err,
		    size_t errlen);
void		 audit_close(struct audit *);
int		 audit_append(struct audit *, const char *workspace,
		    const char *tool, const char *vm_id, const char *outcome);

/*
 * Checks the whole chain against an anchor (seq 0 and "" for none).
 * Returns 0 with the number of lines, or -1 with "line N: what is wrong".
 */
int		 audit_verify(const char *path, long long anchor_seq,
		    const char *anchor_hash, long long *nlines, char *err,
		    size_t errlen);

#endif
