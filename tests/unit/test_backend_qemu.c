/*
 * Unit tests for vmmd/backend_qemu's command line: what QEMU is told, and
 * that nothing from a path can add options (no shell is ever involved).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "../check_run.h"

static const struct qemu_conf conf = { .binary = "/usr/bin/qemu-system-x86_64" };

static void
spec_init(struct vm_spec *s)
{
	memset(s, 0, sizeof(*s));
	s->slot = 7;
	s->uid = 4000007;
	s->gid = 4000007;
	s->vcpus = 2;
	s->memory_mib = 512;
	s->kernel = "/var/lib/mcpvm/vms/7/vmlinuz";
	s->initrd = "/var/lib/mcpvm/vms/7/initrd.img";
	s->append = "console=ttyS0 quiet";
	s->disk = "/var/lib/mcpvm/vms/7/disk.raw";
	s->rundir = "/run/mcpvm/vm-7";
	s->tap_fd = -1;
	s->console_fd = -1;
}

/* Index of the option opt, or -1; the value is argv[i + 1]. */
static int
find(const struct qemu_argv *a, const char *opt, int from)
{
	size_t i;

	for (i = (size_t)from; i < a->n; i++)
		if (strcmp(a->v[i], opt) == 0)
			return (int)i;
	return -1;
}

static const char *
value(const struct qemu_argv *a, const char *opt)
{
	int i = find(a, opt, 0);

	ck_assert_msg(i >= 0 && (size_t)i + 1 < a->n, "no %s", opt);
	return a->v[i + 1];
}

static int
has_value(const struct qemu_argv *a, const char *opt, const char *want)
{
	int i = -1;

	while ((i = find(a, opt, i + 1)) >= 0)
		if ((size_t)i + 1 < a->n && strcmp(a->v[i + 1], want) == 0)
			return 1;
	return 0;
}

START_TEST(tcg_vm_without_network)
{
	struct vm_spec s;
	struct qemu_argv a;

	spec_init(&s);
	ck_assert_int_eq(qemu_build_argv(&conf, &s, 0, 0, &a), 0);
	ck_assert_str_eq(a.v[0], conf.binary);
	ck_assert_ptr_null(a.v[a.n]);
	ck_assert_str_eq(value(&a, "-accel"), "tcg");
	ck_assert_int_eq(find(&a, "-cpu", 0), -1);
	ck_assert_int_ge(find(&a, "-nodefaults", 0), 0);
	ck_assert_int_ge(find(&a, "-no-user-config", 0), 0);
	ck_assert_int_ge(find(&a, "-nographic", 0), 0);
	ck_assert_str_eq(value(&a, "-sandbox"), "on,obsolete=deny,"
	    "elevateprivileges=deny,spawn=deny,resourcecontrol=deny");
	ck_assert_str_eq(value(&a, "-machine"), "q35");
	ck_assert_str_eq(value(&a, "-m"), "512M");
	ck_assert_str_eq(value(&a, "-smp"), "2");
	ck_assert_str_eq(value(&a, "-kernel"), s.kernel);
	ck_assert_str_eq(value(&a, "-initrd"), s.initrd);
	ck_assert_str_eq(value(&a, "-append"), s.append);
	ck_assert(has_value(&a, "-drive", "file=/var/lib/mcpvm/vms/7/disk.raw,"
	    "format=raw,if=none,id=disk0,cache=none,aio=native,"
	    "discard=unmap"));
	ck_assert(has_value(&a, "-device", "virtio-blk-pci,drive=disk0"));
	ck_assert(has_value(&a, "-device", "virtio-serial-pci,id=vser0"));
	ck_assert(has_value(&a, "-chardev", "socket,id=link0,"
	    "path=/run/mcpvm/vm-7/link.sock,server=on,wait=off"));
	ck_assert(has_value(&a, "-device", "virtserialport,bus=vser0.0,"
	    "chardev=link0,name=org.mcpvm.link.0"));
	ck_assert(has_value(&a, "-chardev", "socket,id=qmp0,"
	    "path=/run/mcpvm/vm-7/qmp.sock,server=on,wait=off"));
	ck_assert_str_eq(value(&a, "-mon"), "chardev=qmp0,mode=control");
	ck_assert(has_value(&a, "-chardev", "file,id=con0,"
	    "path=/run/mcpvm/vm-7/console.log"));
	ck_assert_str_eq(value(&a, "-serial"), "chardev:con0");
	ck_assert_str_eq(value(&a, "-pidfile"), "/run/mcpvm/vm-7/qemu.pid");
	/* Network off means no network device at all. */
	ck_assert_int_eq(find(&a, "-netdev", 0), -1);
	ck_assert(!has_value(&a, "-device", "virtio-net-pci,netdev=net0"));
	ck_assert_int_eq(find(&a, "-incoming", 0), -1);
	ck_assert_int_eq(find(&a, "-S", 0), -1);
	qemu_argv_free(&a);
}
END_TEST

START_TEST(kvm_network_and_incoming)
{
	struct vm_spec s;
	struct qemu_argv a;

	spec_init(&s);
	s.tap_fd = 17;
	s.console_fd = -1;
	ck_assert_int_eq(qemu_build_argv(&conf, &s, 1, 1, &a), 0);
	ck_assert_str_eq(value(&a, "-accel"), "kvm");
	ck_assert_str_eq(value(&a, "-cpu"), "host");
	/* The TAP fd is moved to 3 in the child. */
	ck_assert_str_eq(value(&a, "-netdev"), "tap,id=net0,fd=3");
	ck_assert(has_value(&a, "-device", "virtio-net-pci,netdev=net0"));
	ck_assert_str_eq(value(&a, "-incoming"), "defer");
	ck_assert_int_ge(find(&a, "-S", 0), 0);
	qemu_argv_free(&a);
}
END_TEST

/* With a console pipe, QEMU writes the console to it, not to a file. */
START_TEST(console_goes_to_the_pipe)
{
	struct vm_spec s;
	struct qemu_argv a;

	spec_init(&s);
	s.console_fd = 23;
	ck_assert_int_eq(qemu_build_argv(&conf, &s, 0, 0, &a), 0);
	/* Moved to 4 in the child. */
	ck_assert(has_value(&a, "-chardev", "file,id=con0,path=/dev/fd/4"));
	ck_assert(!has_value(&a, "-chardev", "file,id=con0,"
	    "path=/run/mcpvm/vm-7/console.log"));
	ck_assert_str_eq(value(&a, "-serial"), "chardev:con0");
	qemu_argv_free(&a);
}
END_TEST

START_TEST(firmware_only_has_no_kernel_or_disk)
{
	struct vm_spec s;
	struct qemu_argv a;

	spec_init(&s);
	s.kernel = NULL;
	s.disk = NULL;
	ck_assert_int_eq(qemu_build_argv(&conf, &s, 0, 0, &a), 0);
	ck_assert_int_eq(find(&a, "-kernel", 0), -1);
	ck_assert_int_eq(find(&a, "-initrd", 0), -1);
	ck_assert_int_eq(find(&a, "-drive", 0), -1);
	qemu_argv_free(&a);
}
END_TEST

START_TEST(commas_in_paths_cannot_add_options)
{
	struct vm_spec s;
	struct qemu_argv a;

	spec_init(&s);
	s.disk = "/x/disk.raw,readonly=off,file.locking=off";
	s.rundir = "/run/a,b";
	ck_assert_int_eq(qemu_build_argv(&conf, &s, 0, 0, &a), 0);
	ck_assert(has_value(&a, "-drive", "file=/x/disk.raw,,readonly=off,,"
	    "file.locking=off,format=raw,if=none,id=disk0,cache=none,"
	    "aio=native,discard=unmap"));
	ck_assert(has_value(&a, "-chardev", "socket,id=qmp0,"
	    "path=/run/a,,b/qmp.sock,server=on,wait=off"));
	qemu_argv_free(&a);
}
END_TEST

/* The vmgenid device: when the VM has a GUID, and only a well-formed one. */
START_TEST(vmgenid_device)
{
	static const char *const bad[] = {
		"0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f",
		"0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9a",
		"0F1E2D3C-4B5A-4978-8695-A4B3C2D1E0F9",
		"0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0,9",
		"0f1e2d3c04b5a-4978-8695-a4b3c2d1e0f9",
		"",
	};
	struct vm_spec s;
	struct qemu_argv a;
	size_t i;

	spec_init(&s);
	ck_assert_int_eq(qemu_build_argv(&conf, &s, 0, 0, &a), 0);
	for (i = 0; i < a.n; i++)
		ck_assert_ptr_null(strstr(a.v[i], "vmgenid"));
	qemu_argv_free(&a);

	s.vmgenid = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9";
	ck_assert_int_eq(qemu_build_argv(&conf, &s, 0, 0, &a), 0);
	ck_assert(has_value(&a, "-device", "vmgenid,guid=0f1e2d3c-4b5a-4978-"
	    "8695-a4b3c2d1e0f9"));
	qemu_argv_free(&a);
	/* A restore takes the same device. */
	ck_assert_int_eq(qemu_build_argv(&conf, &s, 0, 1, &a), 0);
	ck_assert(has_value(&a, "-device", "vmgenid,guid=0f1e2d3c-4b5a-4978-"
	    "8695-a4b3c2d1e0f9"));
	ck_assert_str_eq(value(&a, "-incoming"), "defer");
	qemu_argv_free(&a);

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		s.vmgenid = bad[i];
		ck_assert_msg(qemu_build_argv(&conf, &s, 0, 0, &a) == -1,
		    "took %s", bad[i]);
	}
}
END_TEST

START_TEST(refuses_empty_machine)
{
	struct vm_spec s;
	struct qemu_argv a;

	spec_init(&s);
	s.vcpus = 0;
	ck_assert_int_eq(qemu_build_argv(&conf, &s, 0, 0, &a), -1);
	spec_init(&s);
	s.memory_mib = 0;
	ck_assert_int_eq(qemu_build_argv(&conf, &s, 0, 0, &a), -1);
}
END_TEST

START_TEST(tcg_translation_cache_can_be_bounded)
{
	struct qemu_conf c = conf;
	struct vm_spec s;
	struct qemu_argv a;

	c.tcg_tb_mib = 128;
	spec_init(&s);
	ck_assert_int_eq(qemu_build_argv(&c, &s, 0, 0, &a), 0);
	ck_assert_str_eq(value(&a, "-accel"), "tcg,tb-size=128");
	qemu_argv_free(&a);
	/* KVM has no translation cache. */
	ck_assert_int_eq(qemu_build_argv(&c, &s, 1, 0, &a), 0);
	ck_assert_str_eq(value(&a, "-accel"), "kvm");
	qemu_argv_free(&a);
}
END_TEST

START_TEST(microvm_uses_mmio_devices)
{
	struct qemu_conf c = conf;
	struct vm_spec s;
	struct qemu_argv a;

	c.machine = "microvm";
	spec_init(&s);
	s.tap_fd = 5;
	s.console_fd = -1;
	ck_assert_int_eq(qemu_build_argv(&c, &s, 0, 0, &a), 0);
	ck_assert_str_eq(value(&a, "-machine"), "microvm");
	ck_assert(has_value(&a, "-device", "virtio-serial-device,id=vser0"));
	ck_assert(has_value(&a, "-device", "virtio-blk-device,drive=disk0"));
	ck_assert(has_value(&a, "-device", "virtio-net-device,netdev=net0"));
	qemu_argv_free(&a);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("backend_qemu");
	TCase *tc = tcase_create("argv");

	tcase_add_test(tc, tcg_vm_without_network);
	tcase_add_test(tc, kvm_network_and_incoming);
	tcase_add_test(tc, console_goes_to_the_pipe);
	tcase_add_test(tc, firmware_only_has_no_kernel_or_disk);
	tcase_add_test(tc, commas_in_paths_cannot_add_options);
	tcase_add_test(tc, refuses_empty_machine);
	tcase_add_test(tc, vmgenid_device);
	tcase_add_test(tc, microvm_uses_mmio_devices);
	tcase_add_test(tc, tcg_translation_cache_can_be_bounded);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(suite());
}
