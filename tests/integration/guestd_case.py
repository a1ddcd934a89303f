"""Shared unittest base for the guestd integration tests: one real guestd
per test class, in its own namespaces (see glink.Guestd).  main() runs a
suite's cases as TAP, one line each (taplib)."""

import os
import shutil
import unittest

import glink
import taplib


def require_host():
    """Skips the whole suite when this machine cannot run guestd."""
    why = None
    if os.geteuid() != 0:
        why = "needs root for namespaces and cgroups"
    elif glink.cgroup2_root() is None:
        why = "no cgroup2 mount"
    elif shutil.which("unshare") is None:
        why = "no unshare(1)"
    elif not os.environ.get("GUESTD"):
        why = "GUESTD= is not set"
    if why:
        taplib.skip_all(why)


class GuestdCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.g = glink.Guestd()

    @classmethod
    def tearDownClass(cls):
        cls.g.stop()
        if os.environ.get("GUESTD_LOG"):
            taplib.note(cls.g.logtext)
        # guestd must have left cleanly, without a sanitizer report.
        bad = [w for w in ("AddressSanitizer", "LeakSanitizer",
                           "runtime error:") if w in cls.g.logtext]
        if cls.g.proc.returncode != 0 or bad:
            raise AssertionError(f"guestd exit {cls.g.proc.returncode}, "
                                 f"{bad}:\n{cls.g.logtext[-4000:]}")

    @property
    def link(self):
        # Tests may reconnect, replacing g.link.
        return self.g.link

    def call(self, op, body=None, **kw):
        return self.g.link.call(op, body, **kw)


def main():
    require_host()
    taplib.run_unittest()
