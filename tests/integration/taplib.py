"""TAP for every Python integration suite, one way.

A check is ok(cond, what, diag): one numbered line, and under a failing
one, as comments, what it saw (diag).  done() prints the plan and exits
1 when a check failed.  skip_all() skips the whole suite as meson's TAP
reader takes it.  Suites written as unittest cases or as test functions
run through run_unittest() and run_tests(): each case is one check, a
failing one shows its traceback, which says what the assertion saw.
"""
import sys
import traceback
import unittest

n = 0
failed = 0


def ok(cond, what, diag=""):
    global n, failed
    n += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", n, what), flush=True)
    if not cond:
        failed += 1
        lines = str(diag).splitlines() if diag is not None else []
        for line in lines[-60:]:
            print("# " + line, flush=True)
    return cond


def skip(what, why):
    """A check that could not run here: counted, never failed."""
    global n
    n += 1
    print("ok %d - %s # SKIP %s" % (n, what.replace("#", ""), why),
          flush=True)


def note(msg):
    for line in str(msg).splitlines() or [""]:
        print("# " + line, flush=True)


def skip_all(why):
    print("1..0 # SKIP %s" % why, flush=True)
    sys.exit(0)


def done():
    print("1..%d" % n, flush=True)
    sys.exit(1 if failed else 0)


def run_tests(tests):
    """Each function one check, named by it; then the plan and exit."""
    for t in tests:
        try:
            t()
        except Exception:
            ok(False, t.__name__, traceback.format_exc())
        else:
            ok(True, t.__name__)
    done()


class _Result(unittest.TestResult):
    """A unittest result told as ok() lines, one per case."""

    def addSuccess(self, test):
        super().addSuccess(test)
        ok(True, self._name(test))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        ok(False, self._name(test), self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        ok(False, self._name(test), self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        skip(self._name(test), reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        ok(True, self._name(test) + " (fails, as expected)")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        ok(False, self._name(test) + " passed, but was expected to fail")

    @staticmethod
    def _name(test):
        # A class fixture's error has no method: its description names it.
        if isinstance(test, unittest.TestCase):
            return "%s.%s" % (type(test).__name__, test._testMethodName)
        return str(test).replace("#", "")


def run_unittest(module="__main__"):
    """Runs the unittest cases of module (the suite's own, by default),
    each one ok() line, then the plan and exit."""
    suite = unittest.defaultTestLoader.loadTestsFromModule(
        sys.modules[module])
    suite.run(_Result())
    done()
