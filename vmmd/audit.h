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
/*
 * Adds a line to the chain.  It is written and made durable, with its
 * anchor, by the next audit_flush: vmmd flushes before it writes any
 * answer (ipc_set_write_barrier) and at the end of the loop turn
 * (kick), so that the lines of many requests answered together cost one
 * fdatasync and one commit, and no answer goes out before its line.
 */
int		 audit_append(struct audit *, const char *workspace,
		    const char *tool, const char *vm_id, const char *outcome);
/* -1 if the lines could not be written: the chain goes back to the last
 * line written, as if those were never appended. */
int		 audit_flush(struct audit *);
/* kick(arg) is called when a line waits for audit_flush. */
void		 audit_set_kick(struct audit *, void (*kick)(void *), void *arg);

/*
 * Checks the whole chain against an anchor (seq 0 and "" for none).
 * Returns 0 with the number of lines, or -1 with "line N: what is wrong".
 */
int		 audit_verify(const char *path, long long anchor_seq,
		    const char *anchor_hash, long long *nlines, char *err,
		    size_t errlen);

#endif
