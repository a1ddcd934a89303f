"""Suspension semantics against a real guestd: freeze stops jobs and their
timeout clocks, thaw sets the wall clock first and restores the budgets."""

import time

import glink

from guestd_case import GuestdCase, main


class Freeze(GuestdCase):
    def status(self, job_id):
        st, _ = self.call("job_status", job_id=job_id)
        return st

    def test_timeout_excludes_frozen_time(self):
        # 3 s budget; frozen for 10 s after 1 s of running.
        t0 = time.monotonic()
        self.call("exec", job_id="t3", command="sleep 100",
                  timeout_ms=3000)
        # A ticker shows the jobs really stop while frozen.
        self.call("exec", job_id="tick",
                  command="while :; do echo x; sleep 0.1; done")
        time.sleep(1.0)
        r, _ = self.call("freeze")
        self.assertTrue(r["frozen"])
        frozen_at = self.status("tick")["stdout_bytes"]
        time.sleep(10.0)
        st = self.status("t3")
        self.assertEqual(st["state"], "running")
        self.assertLess(st["run_ms"], 1500)
        self.assertLessEqual(self.status("tick")["stdout_bytes"],
                             frozen_at + 2)
        a, _ = self.call("activity")
        self.assertTrue(a["active"])
        self.call("thaw", realtime_ns=time.time_ns())
        while self.status("t3")["state"] == "running":
            self.assertLess(time.monotonic() - t0, 20)
            time.sleep(0.05)
        elapsed = time.monotonic() - t0
        st = self.status("t3")
        self.assertEqual(st["state"], "timed_out")
        # Full 3 s of running time: 1 s before, ~2 s after the thaw.
        self.assertGreaterEqual(st["run_ms"], 2900)
        self.assertLess(st["run_ms"], 4000)
        self.assertGreaterEqual(elapsed, 12.8)
        self.assertGreater(self.status("tick")["stdout_bytes"],
                           frozen_at + 4)
        self.call("job_cancel", job_id="tick")

    def test_exec_refused_while_frozen(self):
        self.call("freeze")
        with self.assertRaises(glink.GuestError) as cm:
            self.call("exec", job_id="fz", command="true")
        self.assertEqual(cm.exception.code, "frozen")
        self.call("thaw")
        st = self.g.exec_wait("fz", "echo ok")
        self.assertEqual(st["exit_code"], 0)

    def test_filesystems_frozen_only_as_the_guests_init(self):
        # Here guestd is not PID 1 of a guest: the mounts it sees are this
        # host's, and it must freeze none of them.  (Inside a VM the
        # freeze is shown by the vmmd-snapshot suite.)
        with self.assertRaises(glink.GuestError) as cm:
            self.call("freeze", filesystems=True, thaw_after_ms=1000)
        self.assertEqual(cm.exception.code, "io_error")
        self.assertIn("not the guest's init", cm.exception.message)
        with self.assertRaises(glink.GuestError) as cm:
            self.call("freeze", filesystems=True, thaw_after_ms=999)
        self.assertEqual(cm.exception.code, "invalid_argument")
        self.call("thaw")
        st = self.g.exec_wait("fsz", "echo ok")
        self.assertEqual(st["exit_code"], 0)

    def test_clock_set(self):
        # The harness shares the host clock: set it to what it already is.
        now = time.time_ns()
        self.call("clock_set", realtime_ns=now)
        self.assertLess(abs(time.time_ns() - now), 5 * 10**9)


if __name__ == "__main__":
    main()
