/*
 * guestd: who may be the host on the vsock link.  A guest program can open
 * a vsock connection too (to the guest's own CID, or the loopback CID 1),
 * so the link is only a connection from the host's CID to the link port.
 * I/O-free, so the unit tests drive it with any address.
 */
#include <sys/socket.h>
#include <string.h>

#include <linux/vm_sockets.h>

#include "guestd.h"

int
vsock_peer_is_host(const struct sockaddr *peer, socklen_t peerlen,
    const struct sockaddr *local, socklen_t locallen)
{
	struct sockaddr_vm p, l;

	if (peer == NULL || local == NULL ||
	    peerlen < (socklen_t)sizeof(p) || locallen < (socklen_t)sizeof(l))
		return 0;
	memcpy(&p, peer, sizeof(p));
	memcpy(&l, local, sizeof(l));
	if (p.svm_family != AF_VSOCK || l.svm_family != AF_VSOCK)
		return 0;
	/* Only the host (vhost-vsock, Firecracker) has CID 2. */
	if (p.svm_cid != VMADDR_CID_HOST)
		return 0;
	return l.svm_port == GUEST_VSOCK_PORT;
}
