/*
 * vmmd's snapshots on disk (snapshot_files.c): what startup settles,
 * their removal, the usage that counts against the limits, lookups by
 * owner, their files, and the check of those files before a restore.
 * What makes a snapshot is snapshot.h's.
 */
#ifndef MCPVM_VMMD_SNAPSHOT_FILES_H
#define MCPVM_VMMD_SNAPSHOT_FILES_H

#include <stddef.h>

struct conf_image;
struct snap_record;

/* At startup, once the store is open and before any VM: see
 * snapshot_files.c. */
void	snap_init(void);
/* Bytes all snapshots hold, and the workspace's bytes and count. */
void	snap_usage(const char *workspace, long long *host_bytes,
	    long long *ws_bytes, long long *ws_count);
/* The workspace's ready snapshot id into *r; -1 for any other. */
int	snap_find_owned(const char *id, const char *workspace,
	    struct snap_record *r);
/* The path of its disk.raw, or (memory) its memory.bin. */
void	snap_file(const struct snap_record *, int memory, char *buf,
	    size_t len);
/*
 * Checks a snapshot's files against its manifest and record on the
 * worker pool: the manifest itself, the image it was made with, the
 * disk's size, and the memory file's size and SHA-256.  cb on the loop;
 * err names the file that is wrong.  -1: not queued.
 */
typedef void (*snap_verify_cb)(int rc, const char *err, void *arg);
/*
 * The SHA-256 of a snapshot's memory file at path, as r's is made (on a
 * worker).  For a warm-pool snapshot, vmmd also remembers the file it
 * hashed, and its one restore checks that the file is still that one
 * instead of hashing it again (see snapshot_files.c).
 */
int	snap_memory_digest(const struct snap_record *r, const char *path,
	    char hex[65], char *err, size_t errlen);
int	snap_verify_async(const struct snap_record *,
	    const struct conf_image *, snap_verify_cb, void *);
/* Renamed away, its row dropped, its files removed on the worker pool. */
int	snap_delete(const struct snap_record *, char *err, size_t errlen);

#endif
