"""guestd jobs against a real guestd: output streams, truncation, cancel
and timeout of setsid descendants, limits, identity, link resets."""

import os
import time
import unittest

import glink
from guestd_case import GuestdCase, main


def tagged(tag):
    """Host pids of live processes whose argv[0] is tag (the guestd under
    test runs in its own pid namespace, so its pids mean nothing here)."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0")[0]
            with open(f"/proc/{d}/stat") as f:
                zombie = f.read().rsplit(") ", 1)[1][0] == "Z"
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if argv0 == tag.encode() and not zombie:
            found.append(int(d))
    return found


class Jobs(GuestdCase):
    def wait_file(self, name, timeout=10):
        path = os.path.join(self.g.workspace, name)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if os.path.exists(path) and os.path.getsize(path) > 0:
                with open(path) as f:
                    return f.read()
            time.sleep(0.02)
        self.fail(f"{name} never appeared")

    def test_separate_stdout_stderr(self):
        st = self.g.exec_wait("sep", "echo out1; echo err1 >&2; "
                              "printf out2; printf err2 >&2; exit 7")
        self.assertEqual(st["state"], "completed")
        self.assertEqual(st["exit_code"], 7)
        out, _ = self.g.output("sep", "stdout")
        err, _ = self.g.output("sep", "stderr")
        self.assertEqual(out, b"out1\nout2")
        self.assertEqual(err, b"err1\nerr2")
        # Non-destructive: the same cursor reads the same bytes again.
        r1, b1 = self.call("job_output", job_id="sep", stdout_cursor=5,
                           max_bytes=3)
        r2, b2 = self.call("job_output", job_id="sep", stdout_cursor=5,
                           max_bytes=3)
        self.assertEqual(b1, b2)
        self.assertEqual(b1[:r1["stdout_len"]], b"out")
        self.assertEqual(r1["stdout_next"], 8)

    def test_binary_output_exact(self):
        st = self.g.exec_wait("bin", "printf 'a\\377\\000b\\342\\202'")
        self.assertEqual(st["exit_code"], 0)
        out, _ = self.g.output("bin")
        self.assertEqual(out, b"a\xff\x00b\xe2\x82")

    def test_one_mib_truncates_but_finishes(self):
        st = self.g.exec_wait(
            "big", "head -c 1048576 /dev/zero | tr '\\0' a; "
            "echo done >&2", timeout=60)
        self.assertEqual(st["state"], "completed")
        self.assertEqual(st["exit_code"], 0)
        self.assertTrue(st["truncated"])
        self.assertEqual(st["stdout_bytes"] + st["stderr_bytes"],
                         256 * 1024)
        out, r = self.g.output("big", "stdout")
        self.assertEqual(len(out), 256 * 1024)
        self.assertEqual(set(out), {ord("a")})
        # Every page is at most 16 KiB per stream.
        r, body = self.call("job_output", job_id="big")
        self.assertEqual(r["stdout_len"], 16384)

    def test_stdin_env_identity(self):
        st = self.g.exec_wait(
            "who", "cat; echo; id -u; id -g; echo $HOME $FOO; pwd; "
            "grep -E '^(NoNewPrivs|Groups):' /proc/self/status",
            env={"FOO": "bar baz"}, cwd="sub")
        # cwd does not exist yet: failed to start, saying why.
        self.assertEqual(st["state"], "failed")
        self.assertIn("cwd", st["error"])
        self.assertIn("No such file", st["error"])
        os.mkdir(os.path.join(self.g.workspace, "sub"))
        self.link.call("exec", body=b"from stdin", job_id="who2",
                       command="cat; echo; id -u; id -g; echo $HOME $FOO; "
                       "pwd; grep -E '^(NoNewPrivs|Groups):' "
                       "/proc/self/status", env={"FOO": "bar baz"},
                       cwd="sub")
        for _ in range(100):
            s, _ = self.call("job_status", job_id="who2")
            if s["state"] != "running" and not s["streams_open"]:
                break
            time.sleep(0.05)
        out, _ = self.g.output("who2")
        lines = out.decode().split("\n")
        self.assertEqual(lines[0], "from stdin")
        self.assertEqual(lines[1], "1000")
        self.assertEqual(lines[2], "1000")
        self.assertEqual(lines[3], "/home/dev bar baz")
        self.assertEqual(lines[4], os.path.join(self.g.workspace, "sub"))
        self.assertIn("Groups:\t", out.decode())
        self.assertRegex(out.decode(), r"Groups:\s*\n")
        self.assertRegex(out.decode(), r"NoNewPrivs:\s*1")

    def test_large_stdin_and_env_override(self):
        # (PATH is no example: a login shell's /etc/profile resets it.)
        data = os.urandom(200 * 1024)     # more than a pipe holds
        self.link.call("exec", body=data, job_id="stdin",
                       command="sha256sum | cut -c1-64; echo $TERM",
                       env={"TERM": "xterm-test"})
        for _ in range(200):
            st, _ = self.call("job_status", job_id="stdin")
            if st["state"] != "running" and not st["streams_open"]:
                break
            time.sleep(0.02)
        out, _ = self.g.output("stdin")
        import hashlib
        self.assertEqual(out.decode().split(),
                         [hashlib.sha256(data).hexdigest(),
                          "xterm-test"])

    def test_finishes_within_timeout(self):
        st = self.g.exec_wait("quick", "sleep 0.2; echo ok",
                              timeout_ms=5000)
        self.assertEqual(st["state"], "completed")
        self.assertFalse(st["timed_out"])
        self.assertEqual(st["exit_code"], 0)

    def test_no_root(self):
        st = self.g.exec_wait("sudo", "su -c true root </dev/null; "
                              "echo rc=$?")
        out, _ = self.g.output("sudo")
        self.assertNotIn(b"rc=0", out)

    def test_bad_cwd_escape(self):
        st = self.g.exec_wait("cwdesc", "true", cwd="../..")
        self.assertEqual(st["state"], "failed")
        self.assertIn("..", st["error"])

    def kill_test(self, job_id, how):
        # Unique per run: another checkout may run this test right now.
        tag = f"mcpvmtag-{os.getpid()}-{job_id}"
        # A setsid child and a double-forked orphan, both named tag.
        cmd = (f"setsid bash -c 'exec -a {tag} sleep 1000' & "
               f"(bash -c 'exec -a {tag} sleep 1000' &) ; sleep 1000")
        kw = {"timeout_ms": 1500} if how == "timeout" else {}
        self.call("exec", job_id=job_id, command=cmd, **kw)
        end = time.monotonic() + 5
        while len(tagged(tag)) < 2 and time.monotonic() < end:
            time.sleep(0.02)
        self.assertEqual(len(tagged(tag)), 2)
        a, _ = self.call("activity")
        self.assertTrue(a["active"])
        t0 = time.monotonic()
        if how == "cancel":
            st, _ = self.call("job_cancel", job_id=job_id)
            self.assertEqual(st["state"], "cancelled")
        end = time.monotonic() + 10
        while time.monotonic() < end:
            st, _ = self.call("job_status", job_id=job_id)
            if st["state"] != "running" and not tagged(tag):
                break
            time.sleep(0.05)
        self.assertEqual(tagged(tag), [])
        if how == "timeout":
            self.assertEqual(st["state"], "timed_out")
            self.assertTrue(st["timed_out"])
            self.assertGreaterEqual(st["run_ms"], 1400)
            self.assertLess(time.monotonic() - t0, 5)
        else:
            self.assertEqual(st["state"], "cancelled")
            self.assertFalse(st["timed_out"])

    def test_cancel_kills_setsid_descendants(self):
        self.kill_test("cancel1", "cancel")

    def test_timeout_kills_setsid_descendants(self):
        self.kill_test("tmo1", "timeout")

    def test_running_limit_and_duplicates(self):
        for i in range(4):
            self.call("exec", job_id=f"lim{i}", command="sleep 30")
        with self.assertRaises(glink.GuestError) as cm:
            self.call("exec", job_id="lim4", command="true")
        self.assertEqual(cm.exception.code, "limit_exceeded")
        self.assertIn("4 jobs are running", cm.exception.message)
        with self.assertRaises(glink.GuestError) as cm:
            self.call("exec", job_id="lim0", command="true")
        self.assertEqual(cm.exception.code, "already_exists")
        for i in range(4):
            self.call("job_cancel", job_id=f"lim{i}")
        with self.assertRaises(glink.GuestError) as cm:
            self.call("job_status", job_id="nosuch")
        self.assertEqual(cm.exception.code, "not_found")
        r, _ = self.call("job_status")
        self.assertIn("lim3", [j["job_id"] for j in r["jobs"]])

    def test_detached_descendant_is_activity(self):
        self.call("exec", job_id="det", command="setsid sleep 2 "
                  ">/dev/null 2>&1 </dev/null & exit 0")
        for _ in range(100):
            st, _ = self.call("job_status", job_id="det")
            if st["state"] == "completed":
                break
            time.sleep(0.02)
        self.assertEqual(st["state"], "completed")
        a, _ = self.call("activity")
        self.assertTrue(a["active"])
        self.assertEqual(a["jobs_running"], 0)
        self.call("job_cancel", job_id="det")
        for _ in range(100):
            a, _ = self.call("activity")
            if not a["active"]:
                break
            time.sleep(0.05)
        self.assertFalse(a["active"])


class KeptLimit(GuestdCase):
    def test_256_kept_then_refused(self):
        # Longest ids, so the job list must still fit one control frame.
        def jid(i):
            return f"k{i:063d}"
        for i in range(256):
            self.call("exec", job_id=jid(i), command="true")
            if i % 4 == 3:
                # Stay under the running limit while filling the table.
                for k in range(i - 3, i + 1):
                    while self.call("job_status", job_id=jid(k))[0][
                            "state"] == "running":
                        time.sleep(0.005)
        with self.assertRaises(glink.GuestError) as cm:
            self.call("exec", job_id="k256", command="true")
        self.assertEqual(cm.exception.code, "limit_exceeded")
        self.assertIn("256 jobs", cm.exception.message)
        r, _ = self.call("job_status")
        self.assertEqual(len(r["jobs"]), 256)
        self.assertEqual(r["jobs"][255], {"job_id": jid(255),
                                          "state": "completed"})


class LinkFd(unittest.TestCase):
    def test_socketpair_link(self):
        import socket
        import subprocess
        ours, theirs = socket.socketpair()
        tmp = glink.tempfile.mkdtemp(prefix="guestd-fd-")
        os.chmod(tmp, 0o755)
        cg = os.path.join(glink.cgroup2_root(), os.path.basename(tmp))
        os.mkdir(cg)
        try:
            p = subprocess.Popen(
                ["unshare", "--mount", "--pid", "--fork", "--mount-proc",
                 "--kill-child=SIGTERM", "--", os.environ["GUESTD"],
                 "--no-init", "--link-fd", str(theirs.fileno()),
                 "--workspace", tmp, "--cgroup", cg],
                pass_fds=(theirs.fileno(),))
            theirs.close()
            link = glink.GuestLink(ours)
            self.assertTrue(link.hello.wait(10))
            r, _ = link.call("ping")
            self.assertTrue(r["ok"])
            # The descriptor cannot be re-opened: guestd leaves cleanly.
            link.close()
            self.assertEqual(p.wait(10), 0)
        finally:
            for d in (os.path.join(cg, "mcpvm-jobs"), cg):
                if os.path.isdir(d):
                    os.rmdir(d)
            os.rmdir(tmp)


class LinkReset(GuestdCase):
    def test_garbage_resets_link_jobs_survive(self):
        self.call("exec", job_id="surv", command="echo before; sleep 1; "
                  "echo after")
        old = self.g.link
        # Reserved field set: a rule break, not a crash.
        old.send_raw(glink.HDR.pack(glink.CTRL, 0, 9, 0, 2) + b"{}")
        self.assertTrue(old.wait_dead())
        old.close()
        self.g.link = self.g.accept()
        # Bad JSON in a well-formed frame ends the link as well.
        self.g.link.send_raw(glink.frame(glink.CTRL, 0, 0, b"{\"id\":"))
        self.assertTrue(self.g.link.wait_dead())
        self.g.link.close()
        self.g.link = self.g.accept()
        hello = self.g.link.events[0]
        self.assertEqual(hello["version"], 1)
        self.assertGreaterEqual(hello["jobs"], 1)
        for _ in range(200):
            st, _ = self.g.link.call("job_status", job_id="surv")
            if st["state"] == "completed":
                break
            time.sleep(0.02)
        self.assertEqual(st["state"], "completed")
        out, _ = self.g.output("surv")
        self.assertEqual(out, b"before\nafter\n")


if __name__ == "__main__":
    main()
