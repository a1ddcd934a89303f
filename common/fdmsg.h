/*
 * Descriptors over a Unix socket (SCM_RIGHTS), the one way every mcpvm
 * process packs and unpacks them: common/ipc's frames, vmmd's spawner,
 * vmproxy's QMP getfd and guestd's broker relay.  The received side is
 * the careful one: a peer may send more descriptors than asked, or other
 * control data, and every descriptor the kernel installed is then this
 * process's to close.
 */
#ifndef MCPVM_COMMON_FDMSG_H
#define MCPVM_COMMON_FDMSG_H

#include <sys/socket.h>

#include <stddef.h>

/* Control buffer for n descriptors, aligned for a cmsghdr. */
#define FDMSG_BUF(name, n)						\
	union {								\
		struct cmsghdr	hdr;					\
		char		buf[CMSG_SPACE(sizeof(int) * (n))];	\
	} name

/*
 * Makes msg carry fds[0..nfds) as one SCM_RIGHTS message in buf, which
 * has room for at least nfds (FDMSG_BUF); nfds 0 sends none.
 */
void	fdmsg_attach(struct msghdr *msg, void *buf, size_t buflen,
	    const int *fds, size_t nfds);

/*
 * After recvmsg into msg: moves the descriptors received into fds, at
 * most max, and returns how many.  -1 when the message carried control
 * data other than SCM_RIGHTS, more than max descriptors, or was cut
 * short (MSG_CTRUNC); then every descriptor received has been closed and
 * fds holds none.
 */
int	fdmsg_take(struct msghdr *msg, int *fds, size_t max);

#endif
