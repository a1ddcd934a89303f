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


if __name__ == "__main__":
    main()
