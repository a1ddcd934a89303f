/*
 * What snapshot.c (making one, the tools, vmctl's commands) and
 * snapshot_files.c (the files on disk, their manifest, the startup
 * reconcile, checks before a restore) share; the rest of vmmd sees
 * snapshot.h and snapshot_files.h only.
 */
#ifndef MCPVM_VMMD_SNAPSHOT_LOCAL_H
#define MCPVM_VMMD_SNAPSHOT_LOCAL_H

#include <limits.h>
#include <stddef.h>

struct conf_image;
struct json_object;
struct snap_record;

#define SNAP_DISK	"disk.raw"
#define SNAP_MEMORY	"memory.bin"
#define SNAP_MANIFEST	"manifest.json"
#define SNAP_FORMAT	1
#define MANIFEST_MAX	(64 * 1024)

/* <state_dir>/snapshots, set by snap_init. */
extern char snap_root[PATH_MAX];

/* <root>/<id><suffix>[/<name>]; "" when it does not fit. */
void	snap_path(const char *id, const char *suffix, const char *name,
	    char *buf, size_t len);
/* dir/name into buf; "" when it does not fit. */
void	pjoin(char *buf, size_t len, const char *dir, const char *name);
int	fsync_path(const char *path, int dir);
/* Removes a snapshot directory and its files on the worker pool. */
void	remove_dir_async(const char *dir);
/* What the tools and vmctl say of a snapshot. */
struct json_object *snap_json(const struct snap_record *);
/* The manifest of r, made from the image it was taken of. */
struct json_object *manifest_new(const struct snap_record *,
	    const struct conf_image *);

#endif
