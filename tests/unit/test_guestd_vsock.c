/*
 * Unit tests for guestd/vsockpeer.c: only the host's CID, connecting to the
 * link port, is taken as the host (issue 14, finding 13).  This host has no
 * vsock loopback, so a guest process's connection is built as an address.
 */
#include <sys/socket.h>
#include <sys/un.h>
#include <check.h>
#include <string.h>

#include <linux/vm_sockets.h>

#include "guestd.h"
#include "../check_run.h"

static struct sockaddr_vm
vm(unsigned int cid, unsigned int port)
{
	struct sockaddr_vm a;

	memset(&a, 0, sizeof(a));
	a.svm_family = AF_VSOCK;
	a.svm_cid = cid;
	a.svm_port = port;
	return a;
}

static int
ok(struct sockaddr_vm peer, struct sockaddr_vm local)
{
	return vsock_peer_is_host((struct sockaddr *)&peer, sizeof(peer),
	    (struct sockaddr *)&local, sizeof(local));
}

START_TEST(host_cid_to_link_port_only)
{
	struct sockaddr_vm link = vm(3, GUEST_VSOCK_PORT);

	/* The host, from any of its ports. */
	ck_assert_int_eq(ok(vm(VMADDR_CID_HOST, 1234), link), 1);
	ck_assert_int_eq(ok(vm(VMADDR_CID_HOST, 0x80000001u), link), 1);
	/* A guest program: loopback, the guest's own CID, anything else. */
	ck_assert_int_eq(ok(vm(VMADDR_CID_LOCAL, 1234), link), 0);
	ck_assert_int_eq(ok(vm(3, 1234), link), 0);
	ck_assert_int_eq(ok(vm(VMADDR_CID_HYPERVISOR, 1234), link), 0);
	ck_assert_int_eq(ok(vm(VMADDR_CID_ANY, 1234), link), 0);
	ck_assert_int_eq(ok(vm(4, 1234), link), 0);
	/* The host, but to some other port guestd does not serve. */
	ck_assert_int_eq(ok(vm(VMADDR_CID_HOST, 1234),
	    vm(3, GUEST_VSOCK_PORT + 1)), 0);
}
END_TEST

START_TEST(other_families_and_short_addresses)
{
	struct sockaddr_vm host = vm(VMADDR_CID_HOST, 1234);
	struct sockaddr_vm link = vm(3, GUEST_VSOCK_PORT);
	struct sockaddr_un un;

	memset(&un, 0, sizeof(un));
	un.sun_family = AF_UNIX;
	ck_assert_int_eq(vsock_peer_is_host((struct sockaddr *)&un,
	    sizeof(un), (struct sockaddr *)&link, sizeof(link)), 0);
	ck_assert_int_eq(vsock_peer_is_host((struct sockaddr *)&host,
	    sizeof(host) - 1, (struct sockaddr *)&link, sizeof(link)), 0);
	ck_assert_int_eq(vsock_peer_is_host((struct sockaddr *)&host,
	    sizeof(host), (struct sockaddr *)&link, 0), 0);
	ck_assert_int_eq(vsock_peer_is_host(NULL, 0,
	    (struct sockaddr *)&link, sizeof(link)), 0);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("guestd_vsock");
	TCase *tc = tcase_create("peer");

	tcase_add_test(tc, host_cid_to_link_port_only);
	tcase_add_test(tc, other_families_and_short_addresses);
	suite_add_tcase(s, tc);
	return check_run(s);
}
