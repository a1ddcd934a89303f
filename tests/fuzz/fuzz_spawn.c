/*
 * libFuzzer target for vmmd's spawner's decoder (vmmd/spawn.c): the
 * bytes a compromised vmmd could send it.  The first byte says how many
 * descriptors came with the message (its low bits) and whether the
 * spawner has a jail (its top bit); the rest is the message.  What the
 * decoder accepts must start a configured binary as a VM uid (or nobody,
 * for QEMU's --version) with every descriptor in bounds, and a jailed
 * VM's with its own two directories alone: spawn_check aborts otherwise.
 */
#include <stdint.h>
#include <stdlib.h>

#include "spawn.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct spawn_conf c[2] = { {
		.qemu = "/usr/bin/qemu-system-x86_64",
		.vmproxy = "/usr/libexec/mcpvm/vmproxy",
		.uid_base = 900000,
		.nslots = 16,
		.cg = NULL,
	}, {
		.qemu = "/usr/bin/qemu-system-x86_64",
		.vmproxy = "/usr/libexec/mcpvm/vmproxy",
		.uid_base = 900000,
		.nslots = 16,
		.cg = NULL,
		.vm_dir = "/var/lib/mcpvm/vms",
		.run_dir = "/run/mcpvm/vms",
	} };

	if (size < 1)
		return 0;
	(void)spawn_check(&c[data[0] >> 7], data + 1, size - 1,
	    (data[0] & 0x7f) % (SPAWN_MAX_FDS + 2));
	return 0;
}
