"""guestd as PID 1 (stage two) in fresh namespaces: it mounts the API
filesystems and cgroup2, sets the hostname, brings up lo, runs jobs, and
"shutdown" ends it (in a pid namespace reboot() ends the namespace)."""

import time
import unittest

import glink
from guestd_case import main


class Pid1(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.g = glink.Guestd(init=True, veth=True, cmdline=(
            "quiet mcpvm.hostname=testvm "
            "mcpvm.net=10.231.7.2/30,gw=10.231.7.1 console=ttyS0"))

    @classmethod
    def tearDownClass(cls):
        if cls.g.proc.poll() is None:
            cls.g.stop()

    def test_stage_two_then_shutdown(self):
        g = self.g
        st = g.exec_wait("sys", "hostname; cat /proc/1/comm; "
                         "awk '{print $2, $3}' /proc/mounts; "
                         "cat /sys/class/net/lo/flags")
        net = g.exec_wait("net", "ip -4 -o addr show dev eth0; "
                          "ip -4 route show default; "
                          "cat /sys/class/net/eth0/flags")
        self.assertEqual(net["exit_code"], 0)
        nout, _ = g.output("net")
        self.assertIn(b"inet 10.231.7.2/30", nout)
        self.assertIn(b"default via 10.231.7.1 dev eth0", nout)
        self.assertTrue(int(nout.split()[-1], 16) & 0x1, "eth0 is not up")
        self.assertEqual(st["state"], "completed")
        out, _ = g.output("sys")
        lines = out.decode().splitlines()
        self.assertEqual(lines[0], "testvm")
        self.assertEqual(lines[1], "guestd")
        mounts = set(lines[2:-1])
        for m in ("/proc proc", "/sys sysfs", "/dev devtmpfs", "/run tmpfs",
                  "/tmp tmpfs", "/sys/fs/cgroup cgroup2", "/dev/pts devpts"):
            self.assertIn(m, mounts)
        self.assertTrue(int(lines[-1], 16) & 0x1, "lo is not up")
        # A job's orphan is reaped by PID 1 (no zombie stays behind).
        g.exec_wait("orphan", "(sleep 0.2 &) ; true")
        time.sleep(0.5)
        st = g.exec_wait("zombies", "ps -eo stat= | grep -c '^Z' || true")
        out, _ = g.output("zombies")
        self.assertEqual(out.strip(), b"0")
        # PID 1 of a pid namespace on the host: identity would rewrite the
        # host's files and RNG, so it is refused and nothing changes.
        try:
            before = open("/etc/machine-id").read()
        except OSError:
            before = None
        with self.assertRaises(glink.GuestError) as e:
            g.link.call("identity", machine_id="ab" * 16,
                        boot_id="0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9",
                        hostname="not-the-host", entropy_b64="A" * 86 + "==")
        self.assertEqual(e.exception.code, "invalid_argument")
        self.assertIn("PID 1 of a guest", e.exception.message)
        try:
            after = open("/etc/machine-id").read()
        except OSError:
            after = None
        self.assertEqual(before, after)
        g.link.call("exec", job_id="long", command="sleep 1000")
        r, _ = g.link.call("shutdown")
        self.assertTrue(r["ok"])
        t = time.monotonic()
        g.proc.wait(10)
        self.assertLess(time.monotonic() - t, 10)
        g.stop()
        self.assertIn("powering off", g.logtext)


if __name__ == "__main__":
    main()
