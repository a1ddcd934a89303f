"""file_read / file_write against a real guestd: 128 KiB bodies over
several frames, atomic replacement, ownership, and every escape refused."""

import os

import glink
from guestd_case import GuestdCase, main


class Files(GuestdCase):
    def ws(self, *p):
        return os.path.join(self.g.workspace, *p)

    def test_roundtrip_128k(self):
        data = os.urandom(128 * 1024)
        r, _ = self.call("file_write", body=data, path="d1/d2/blob.bin",
                         create_parents=True, mode=0o640)
        self.assertEqual(r["size"], len(data))
        st = os.stat(self.ws("d1/d2/blob.bin"))
        self.assertEqual((st.st_uid, st.st_gid), (1000, 1000))
        self.assertEqual(st.st_mode & 0o777, 0o640)
        self.assertEqual(os.stat(self.ws("d1")).st_uid, 1000)
        r, body = self.call("file_read", path="d1/d2/blob.bin")
        self.assertEqual(body, data)
        self.assertEqual(r["mode"], 0o640)
        # Atomic: no temporary file is left beside it.
        self.assertEqual(os.listdir(self.ws("d1/d2")), ["blob.bin"])

    def test_replace_keeps_mode_and_empty_file(self):
        self.call("file_write", body=b"#!/bin/sh\n", path="s.sh",
                  mode=0o755)
        self.call("file_write", body=b"", path="s.sh")
        self.assertEqual(os.stat(self.ws("s.sh")).st_mode & 0o777, 0o755)
        r, body = self.call("file_read", path="s.sh")
        self.assertEqual(body, b"")
        self.assertEqual(r["size"], 0)

    def test_limits(self):
        with open(self.ws("huge"), "wb") as f:
            f.write(b"x" * (128 * 1024 + 1))
        with self.assertRaises(glink.GuestError) as cm:
            self.call("file_read", path="huge")
        self.assertEqual(cm.exception.code, "too_large")
        with self.assertRaises(glink.GuestError) as cm:
            self.call("file_write", body=b"x" * (128 * 1024 + 1), path="h2")
        self.assertEqual(cm.exception.code, "invalid_argument")
        self.assertIn("limit", cm.exception.message)
        with self.assertRaises(glink.GuestError) as cm:
            self.call("file_write", body=b"x", path="nodir/f")
        self.assertEqual(cm.exception.code, "not_found")
        with self.assertRaises(glink.GuestError) as cm:
            self.call("file_read", path="nothere")
        self.assertEqual(cm.exception.code, "not_found")

    def refused(self, op, path, words, **kw):
        with self.assertRaises(glink.GuestError) as cm:
            if op == "read":
                self.call("file_read", path=path)
            else:
                self.call("file_write", body=b"pwned", path=path, **kw)
        self.assertEqual(cm.exception.code, "forbidden_path", path)
        self.assertIn(words, cm.exception.message)

    def test_escapes_refused(self):
        outside = os.path.join(self.g.tmp, "outside")
        os.mkdir(outside)
        with open(os.path.join(outside, "secret"), "w") as f:
            f.write("secret")
        os.symlink(outside, self.ws("link"))
        os.symlink(os.path.join(outside, "secret"), self.ws("flink"))
        os.symlink("/etc/passwd", self.ws("abs"))
        for op in ("read", "write"):
            self.refused(op, "../outside/secret", '".."')
            self.refused(op, "a/../../outside/secret", '".."')
            self.refused(op, "/etc/passwd", "relative")
            self.refused(op, "link/secret", "symlink")
            self.refused(op, "flink", "symlink")
            self.refused(op, "abs", "symlink")
        self.refused("write", "link/sub/new", "symlink",
                     create_parents=True)
        with open(os.path.join(outside, "secret")) as f:
            self.assertEqual(f.read(), "secret")
        self.assertFalse(os.path.exists(os.path.join(outside, "sub")))
        self.assertEqual(os.readlink(self.ws("flink")),
                         os.path.join(outside, "secret"))

    # Issue 14, finding 12: guestd (root) does file operations with the
    # workspace user's credentials, so it reads, creates and replaces only
    # what uid 1000 could itself.

    def root_only(self, name, data=b"root only\n"):
        path = os.path.join(self.g.tmp, name)   # same filesystem
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, 0o600)
        return path

    def test_hard_link_to_root_file_refused(self):
        secret = self.root_only("shadow-like")
        os.link(secret, self.ws("hl"))
        with self.assertRaises(glink.GuestError) as cm:
            self.call("file_read", path="hl")
        self.assertEqual(cm.exception.code, "forbidden_path")
        # Replacing it is the user's right (their directory); the root
        # file keeps its content, owner and mode.
        self.call("file_write", body=b"mine", path="hl")
        st = os.stat(secret)
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (0, 0o600))
        with open(secret, "rb") as f:
            self.assertEqual(f.read(), b"root only\n")

    def test_root_only_file_in_workspace_refused(self):
        path = self.ws("rootfile")
        with open(path, "wb") as f:
            f.write(b"not for uid 1000")
        os.chmod(path, 0o600)
        with self.assertRaises(glink.GuestError) as cm:
            self.call("file_read", path="rootfile")
        self.assertEqual(cm.exception.code, "forbidden_path")

    def test_root_directory_not_written(self):
        d = self.ws("rootdir")
        os.mkdir(d, 0o755)
        for kw in ({"path": "rootdir/f"},
                   {"path": "rootdir/sub/f", "create_parents": True}):
            with self.assertRaises(glink.GuestError) as cm:
                self.call("file_write", body=b"x", **kw)
            self.assertEqual(cm.exception.code, "forbidden_path", kw)
        self.assertEqual(os.listdir(d), [])

    def test_created_directories_owned_without_chown(self):
        # Made with the user's fsuid: nothing is chowned by name, so a
        # component swapped for a link between two calls is never chowned.
        secret = self.root_only("victim")
        self.call("file_write", body=b"x", path="p1/p2/f",
                  create_parents=True)
        for d in ("p1", "p1/p2"):
            st = os.stat(self.ws(d))
            self.assertEqual((st.st_uid, st.st_gid), (1000, 1000), d)
        st = os.stat(self.ws("p1/p2/f"))
        self.assertEqual((st.st_uid, st.st_gid), (1000, 1000))
        self.assertEqual(os.stat(secret).st_uid, 0)


if __name__ == "__main__":
    main()
