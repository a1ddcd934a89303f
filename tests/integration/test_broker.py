#!/usr/bin/env python3
# The job broker pipe end to end: real authd, vmmd, vmproxy and mcpd, a
# real QEMU TCG VM of the `test` image with this tree's guestd (built into
# a cache directory of its own), and a controller speaking the pipe's
# frames over mcpd's WebSocket.  Two jobs share the VM, one with a pipe: an
# HTTP request the job writes reaches the controller byte for byte and its
# answer returns after the job shut down its write side; the other job is
# refused by path and through /proc/<pid>/root.  Then every refusal code,
# split and combined frames, 1002 for an unknown conn_id, backpressure and
# the 10 s close of a connection that stops reading, mcpvm-attach --broker
# against a stock HTTP server, close on suspend (pause and hibernate), job
# end, cancel, revocation, expiry and destroy, the token again after
# resume, a retry that keeps its first token, nothing left after a vmmd
# restart, and a grep of the state and runtime directories and the logs
# for the tokens and for a job's route secret, which strace(1) reads from
# what vmmd sends vmproxy.
#
# Environment: as test_vmmd.py, plus MCPD and ATTACH.  TAP on stdout.
# Needs root and strace.
import base64
import http.server
import os
import re
import secrets
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vmmdlib as base  # noqa: E402
from vmmdlib import ok, note, read, wait_for  # noqa: E402
from mcpdlib import WS  # noqa: E402

PORT = int(os.environ.get("BROKER_PORT", "18190"))
HOSTHDR = "127.0.0.1:%d" % PORT
OPEN, DATA, CLOSE = 1, 2, 3

REQUEST = (b"POST /v1/call HTTP/1.1\r\nHost: broker\r\n"
           b"Authorization: Bearer placeholder\r\nContent-Length: 5\r\n"
           b"\r\nhello")
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

# In the guest.  http: one exchange with a half-close, then wait until
# told; stall: connect, never read; sleep: hold the pipe.
CLIENT = r"""
import os, socket, sys, time
mode = sys.argv[1]
open(mode + ".pid", "w").write(str(os.getpid()))
if mode != "sleep":
    s = socket.socket(socket.AF_UNIX)
    s.connect(os.environ["MCPVM_BROKER_SOCKET"])
    if mode == "http":
        s.sendall(%r)
        s.shutdown(socket.SHUT_WR)
        reply = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            reply += d
        sys.stdout.write("reply:" + reply.decode())
        sys.stdout.flush()
        s.close()
        # A second connection that the guest ends first.
        s = socket.socket(socket.AF_UNIX)
        s.connect(os.environ["MCPVM_BROKER_SOCKET"])
        s.sendall(b"bye")
        s.close()
    else:
        s.sendall(b"stall\n")
deadline = time.time() + 600
while not os.path.exists(mode + ".done") and time.time() < deadline:
    time.sleep(0.1)
""" % REQUEST

INTRUDER = r"""
import os, socket, sys
pid = open("http.pid").read().strip()
print("own path exists:", os.path.exists("/run/mcpvm-broker/broker.sock"))
for path in ("/run/mcpvm-broker/broker.sock",
             "/proc/%s/root/run/mcpvm-broker/broker.sock" % pid):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        s.settimeout(20)
        print(path, "read:", repr(s.recv(100)))
    except OSError as e:
        print(path, "error:", e.__class__.__name__)
    s.close()
"""


class Stack(base.Host):
    """authd and vmmd as the vmmd suite runs them, plus mcpd."""

    def __init__(self, manifest):
        super().__init__(manifest)
        self.mcpd = None
        self.mcpd_log = os.path.join(self.dir, "mcpd.log")
        self.authd_peers = "root mcpvm"

    def write_more_conf(self, f):
        f.write("[mcpd]\nlisten = 127.0.0.1:%d\n"
                "allowed_hosts = 127.0.0.1\n"
                "allowed_origins = http://127.0.0.1:%d\n" % (PORT, PORT))

    def start_mcpd(self):
        log = open(self.mcpd_log, "ab")
        self.mcpd = subprocess.Popen([os.environ["MCPD"], "-d", "-v", "-f",
                                      self.conf], stdout=log, stderr=log)
        log.close()
        wait_for(lambda: "started (" in read(self.mcpd_log) or
                 self.mcpd.poll() is not None, 20, "mcpd ready")
        if self.mcpd.poll() is not None:
            raise RuntimeError("mcpd exited:\n" + read(self.mcpd_log))

    def cleanup(self):
        if self.mcpd is not None and self.mcpd.poll() is None:
            self.mcpd.terminate()
            self.mcpd.wait()
        super().cleanup()


class D:
    host = HOSTHDR
    port = PORT


class Pipe:
    """A controller: the WebSocket and the frames in its messages."""

    def __init__(self, vm, job, token, cred, headers=None):
        h = {"X-Broker-Pipe": token}
        h.update(headers or {})
        self.ws = WS(D, "/v1/vms/%s/jobs/%s/broker" % (vm, job), auth=cred,
                     headers=h)
        self.status = self.ws.status
        self.rx = b""
        self.closed = None

    def send(self, payload):
        self.ws.send(2, payload)

    def frames(self, want, timeout=60):
        """Frames until want(frames) holds; stops at a close."""
        got = []
        self.ws.s.settimeout(timeout)
        while not want(got):
            op, p = self.ws.recv()
            if op == 8:
                self.closed = (struct.unpack("!H", p[:2])[0],
                               p[2:].decode()) if len(p) >= 2 else (1005,
                                                                    "")
                return got
            if op == 9:
                self.ws.send(10, p)
                continue
            if op != 2:
                continue
            self.rx += p
            while self.rx:
                t = self.rx[0]
                hl = 9 if t == DATA else 5
                if len(self.rx) < hl:
                    break
                cid = struct.unpack("!I", self.rx[1:5])[0]
                n = struct.unpack("!I", self.rx[5:9])[0] if t == DATA else 0
                if len(self.rx) < hl + n:
                    break
                got.append((t, cid, self.rx[hl:hl + n]))
                self.rx = self.rx[hl + n:]
        return got

    def wait_close(self, timeout=60):
        if self.closed is None:
            self.frames(lambda g: False, timeout)
        return self.closed

    def close(self):
        self.ws.close()


def data(cid, payload):
    return struct.pack("!BII", DATA, cid, len(payload)) + payload


def close_frame(cid):
    return struct.pack("!BI", CLOSE, cid)


def token():
    return base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()


def put(a, vm, path, text):
    okk, r = a("vm_write_file", vm_id=vm, path=path,
               data_base64=base64.b64encode(text.encode()).decode())
    if not okk:
        raise RuntimeError("write %s: %r" % (path, r))


def exec_job(a, vm, cmd, rid=None, **kw):
    okk, r = a("vm_exec", vm_id=vm, request_id=rid or "rq-" +
               secrets.token_hex(6), command=cmd, **kw)
    if not okk:
        raise RuntimeError("exec %r: %r" % (cmd, r))
    return r


def output(a, vm, job):
    okk, r = a("vm_job_output", vm_id=vm, job_id=job)
    return r if okk else {}


def pid_written(a, vm, path):
    okk, r = a("vm_read_file", vm_id=vm, path=path)
    return okk and base64.b64decode(r["data_base64"]).isdigit()


class SentSecrets:
    """What vmmd sends while the block runs, seen with strace(1) as root:
    afterwards secret(job) is the route secret vmmd gave vmproxy (and the
    guest) for that job.  Nothing depends on where a page of it lies."""

    def __init__(self, h):
        self.h = h
        self.path = os.path.join(h.dir, "vmmd.strace")
        self.lines = []
        self.err = ""

    def __enter__(self):
        self.proc = subprocess.Popen(
            ["strace", "-f", "-p", str(self.h.vmmd.pid), "-e",
             "trace=sendmsg,write,writev", "-s", "65536", "-xx", "-o",
             self.path], stderr=subprocess.PIPE)
        # Once it says so, every later system call of vmmd is traced.
        line = self.proc.stderr.readline().decode()
        self.err = line
        if "attached" not in line:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("strace -p vmmd: %r" % line)
        return self

    def __exit__(self, *exc):
        self.proc.send_signal(signal.SIGINT)
        self.err += self.proc.communicate(timeout=60)[1].decode()
        with open(self.path, "rb") as f:
            self.lines = f.read().splitlines()
        os.unlink(self.path)
        return False

    def objects(self, job):
        """The flat JSON objects vmmd sent that name job."""
        objs = []
        for line in self.lines:
            sent = b"".join(bytes.fromhex(x.decode().replace("\\x", ""))
                            for x in re.findall(rb'"((?:\\x[0-9a-f]{2})+)"',
                                                line))
            objs += [o for o in re.findall(rb"\{[^{}]*\}", sent)
                     if b'"%s"' % job.encode() in o]
        return objs

    def secret(self, job):
        """The one secret vmmd sent with job's id, or None."""
        found = set()
        for o in self.objects(job):
            found.update(re.findall(
                rb'"(?:broker_)?secret" *: *"([0-9a-f]{64})"', o))
        return found.pop().decode() if len(found) == 1 else None

    def saw(self, job):
        """For a failure's message: what was seen."""
        return "strace said %r; %d lines traced; with the job's id: %r" % (
            self.err, len(self.lines),
            [o[:400] for o in self.objects(job)][:8])


def grep_tree(needles, paths):
    """Files under paths holding any needle, as (path, needle)."""
    hits = []
    for top in paths:
        for root, _, files in os.walk(top):
            for name in files:
                p = os.path.join(root, name)
                try:
                    if not os.path.isfile(p) or os.path.islink(p):
                        continue
                    with open(p, "rb") as f:
                        tail = b""
                        while True:
                            b = f.read(16 << 20)
                            if not b:
                                break
                            buf = tail + b
                            for nd in needles:
                                if nd in buf:
                                    hits.append((p, nd[:8]))
                            tail = buf[-256:]
                except OSError:
                    pass
    return hits


class Echo(http.server.BaseHTTPRequestHandler):
    """The host-side broker stand-in: answers a POST with what it got."""
    seen = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Echo.seen.append((self.path, self.headers.get("Authorization"),
                          body))
        out = b"echo:" + body
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *a):
        pass


def check_attach_cli(h, a, vm, cred, tokens):
    """mcpvm-attach --broker relays the job's request to a stock HTTP
    server on the host and its answer back."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    tok = token()
    tokens.append(tok)
    tf, pf = os.path.join(h.dir, "cred-a"), os.path.join(h.dir, "pipe-tok")
    for path, text in ((tf, cred), (pf, tok)):
        with open(path, "w") as f:
            f.write(text + "\n")
    a("vm_exec", vm_id=vm, request_id="rm-done", command="rm -f http.done",
      wait_seconds=30)
    job = exec_job(a, vm, "python3 client.py http",
                   broker_pipe_token=tok)["job_id"]
    cli = subprocess.Popen([os.environ["ATTACH"], "--endpoint",
                            "http://" + HOSTHDR, "--token-file", tf,
                            "--vm", vm, "--broker", job,
                            "--pipe-token-file", pf, "--connect",
                            "tcp:127.0.0.1:%d" % srv.server_port],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: "reply:" in output(a, vm, job).get("stdout", ""),
                 60, "the job's reply through mcpvm-attach")
        got = output(a, vm, job).get("stdout", "")
        ok(got.startswith("reply:HTTP/1.0 200") and got.endswith(
           "echo:hello"), "mcpvm-attach --broker: the job's request "
           "reaches a stock HTTP server and its answer returns", got)
        ok(Echo.seen and Echo.seen[0] == ("/v1/call", "Bearer placeholder",
                                          b"hello"),
           "the server saw the request unchanged", Echo.seen)
        put(a, vm, "http.done", "1")
        rc = cli.wait(60)
        ok(rc == 0, "mcpvm-attach exits 0 when the job ends",
           cli.stderr.read().decode())
    finally:
        if cli.poll() is None:
            cli.kill()
        srv.shutdown()


def check_refusals(h, vm, job, tok, cred_a, cred_b, other_job):
    cases = [
        ("a wrong token", job, token(), cred_a, None, 404),
        ("another workspace", job, tok, cred_b, None, 404),
        ("an unknown job", "j" + "0" * 24, tok, cred_a, None, 404),
        ("a job without a pipe", other_job, tok, cred_a, None, 404),
        ("a malformed token", job, "short", cred_a, None, 404),
        ("an Origin", job, tok, cred_a, {"Origin": "http://" + HOSTHDR}, 403),
        ("no credential", job, tok, None, None, 401),
    ]
    for what, j, t, c, extra, want in cases:
        p = Pipe(vm, j, t, c, extra)
        ok(p.status == want, "attach with %s: %d" % (what, want),
           "got %d %r" % (p.status, getattr(p.ws, "body", b"")[:200]))
        p.close()


def main():
    if os.geteuid() != 0:
        base.skip_all("needs root")
    if not os.environ.get("MCPD"):
        base.skip_all("MCPD= is not set")
    base.become_subreaper()
    base.exit_cleanly_on_sigterm()
    manifest = base.build_image("test", os.path.join(base.CACHE,
                                                     "broker-test"))
    h = Stack(manifest)
    try:
        h.setup()
        # One attached pipe per VM, so that the limit is reachable with
        # the jobs a VM may run at once.
        h.write_conf(mcpd_user="mcpvm", max_broker_pipes_per_vm=1)
        h.start_authd()
        h.start_vmmd()
        h.start_mcpd()
        run(h)
    except Exception:
        import traceback
        ok(False, "the run went through", traceback.format_exc())
    finally:
        if base.failed:
            for name, path in (("authd", h.authd_log), ("vmmd", h.vmmd_log),
                               ("mcpd", h.mcpd_log)):
                note("--- %s log, last lines" % name)
                for line in read(path).splitlines()[-40:]:
                    note(line)
        h.cleanup()
    print("1..%d" % base.n)
    sys.exit(1 if base.failed else 0)


def run(h):
    cred_a = h.issue("brk-a", "--max-vms", "2", "--memory-mib", "1024")
    cred_b = h.issue("brk-b", "--max-vms", "1", "--memory-mib", "512")
    a = base.Client(h, cred_a)
    okk, r = a("vm_create", request_id="create-1", idle_seconds=0)
    if not ok(okk, "a VM for the pipe", r):
        return
    vm = r["vm_id"]
    put(a, vm, "client.py", CLIENT)
    put(a, vm, "intruder.py", INTRUDER)
    tokens = []

    # ---- one job with a pipe, one without -------------------------------
    tok = token()
    tokens.append(tok)
    r = exec_job(a, vm, "python3 client.py http", rid="rq-first",
                 broker_pipe_token=tok)
    ok(r.get("broker_pipe") is True, "vm_exec with a token: broker_pipe "
       "true", r)
    job = r["job_id"]
    # A retry of the same request_id with another token: the first answer,
    # and the first token stays the pipe's.
    tok_retry = token()
    tokens.append(tok_retry)
    r1 = exec_job(a, vm, "python3 client.py http", rid="rq-first",
                  broker_pipe_token=tok_retry)
    ok(r1 == r, "a retried request_id with another token: the first "
       "result", (r, r1))
    # Its pid is written (then it connects; the connection waits for us).
    wait_for(lambda: pid_written(a, vm, "http.pid"), 60, "the client's pid")
    r2 = exec_job(a, vm, "python3 intruder.py", wait_seconds=60)
    other = r2["job_id"]
    ok("broker_pipe" not in r2, "vm_exec without a token: no broker_pipe",
       r2)
    out = r2.get("output", {}).get("stdout", "") or \
        output(a, vm, other).get("stdout", "")
    ok("own path exists: False" in out, "the other job sees no socket at "
       "the path", out)
    ok(re.search(r"/run/mcpvm-broker/broker.sock error:", out) is not None,
       "the other job cannot connect by the path", out)
    ok(re.search(r"/proc/\d+/root/run/mcpvm-broker/broker.sock "
                 r"(read: b''|error: (Connection|BrokenPipe))", out)
       is not None, "through /proc/<pid>/root it is refused", out)

    check_refusals(h, vm, job, tok, cred_a, cred_b, other)
    p = Pipe(vm, job, tok_retry, cred_a)
    ok(p.status == 404, "the retry's token does not replace the first",
       p.status)
    p.close()

    # ---- the exchange ---------------------------------------------------
    p = Pipe(vm, job, tok, cred_a)
    ok(p.status == 101, "the controller attaches", p.status)
    second = Pipe(vm, job, tok, cred_a)
    ok(second.status == 409, "a second concurrent attach: 409",
       second.status)
    second.close()
    want = len(REQUEST)
    fr = p.frames(lambda g: sum(len(x[2]) for x in g if x[0] == DATA) >=
                  want)
    ok(fr and fr[0][0] == OPEN and fr[0][1] == 1, "the waiting connection "
       "arrives as open(1)", fr[:1])
    body = b"".join(x[2] for x in fr if x[0] == DATA and x[1] == 1)
    ok(body == REQUEST, "the job's request arrives byte for byte",
       body[:200])
    # Split: one frame over three messages; combined: the rest and the
    # close in one message.  The close follows the data before it.
    f1 = data(1, ANSWER[:10])
    p.send(f1[:3])
    p.send(f1[3:7])
    p.send(f1[7:])
    p.send(data(1, ANSWER[10:]) + close_frame(1))
    wait_for(lambda: "reply:" in output(a, vm, job).get("stdout", ""), 30,
             "the reply reaches the job")
    got = output(a, vm, job).get("stdout", "")
    ok(got == "reply:" + ANSWER.decode(), "after its half-close the job "
       "reads the answer, whole", got)
    fr = p.frames(lambda g: any(x[0] == CLOSE for x in g), 60)
    ok([x for x in fr if x[1] == 2] == [(OPEN, 2, b""), (DATA, 2, b"bye"),
                                        (CLOSE, 2, b"")],
       "a connection the guest ends: open(2), its data, close(2)", fr)
    ok(not any(x[1] == 1 for x in fr), "nothing more of conn 1, which the "
       "controller closed", fr)

    # ---- an unknown conn_id ----------------------------------------------
    p.send(data(77, b"x"))
    ok(p.wait_close() == (1002, "conn_id 77 was never assigned"),
       "a conn_id never assigned closes the pipe with 1002", p.closed)
    p.close()
    p = Pipe(vm, job, tok, cred_a)
    ok(p.status == 101, "the same token attaches again", p.status)
    put(a, vm, "http.done", "1")
    ok(p.wait_close(60) == (1001, "job finished"),
       "the job's end closes the pipe: 1001 job finished", p.closed)
    p.close()
    p = Pipe(vm, job, tok, cred_a)
    ok(p.status == 404, "a finished job's pipe: 404", p.status)
    p.close()

    check_attach_cli(h, a, vm, cred_a, tokens)

    # ---- backpressure: a guest connection that stops reading -------------
    tok2 = token()
    tokens.append(tok2)
    job2 = exec_job(a, vm, "python3 client.py stall",
                    broker_pipe_token=tok2)["job_id"]
    p = Pipe(vm, job2, tok2, cred_a)
    ok(p.status == 101, "attached to the stalling job's pipe", p.status)
    fr = p.frames(lambda g: any(x[0] == DATA for x in g), 60)
    ok(fr and fr[0][:2] == (OPEN, 1), "its connection opens", fr[:2])
    sent = [0]
    blob = data(1, b"z" * 65536)

    def flood():
        try:
            for _ in range(1024):              # 64 MiB
                p.ws.send(2, blob)
                sent[0] += len(blob)
        except OSError:
            pass
    t = threading.Thread(target=flood, daemon=True)
    t.start()
    fr = p.frames(lambda g: any(x[0] == CLOSE for x in g), 120)
    ok(any(x[:2] == (CLOSE, 1) for x in fr), "the connection that stopped "
       "reading is closed by the service", fr)
    ok(sent[0] < 1024 * len(blob), "meanwhile the controller could not "
       "write: the service stopped reading it (%d MiB of 64 taken)" %
       (sent[0] >> 20))
    t.join(120)
    ok(p.closed is None, "the pipe itself stays open", p.closed)

    # ---- lifecycle -------------------------------------------------------
    okk, r = a("vm_suspend", vm_id=vm, mode="pause")
    ok(not okk and r.get("code") == "busy", "vm_suspend with a pipe "
       "attached: busy", r)
    okk, r = a("vm_suspend", vm_id=vm, mode="pause", force=True)
    ok(okk, "vm_suspend force", r)
    ok(p.wait_close(60) == (1001, "suspended"), "suspend closes it: 1001 "
       "suspended", p.closed)
    p.close()
    okk, r = a("vm_resume", vm_id=vm)
    ok(okk, "vm_resume", r)
    p = Pipe(vm, job2, tok2, cred_a)
    ok(p.status == 101, "after resume the same token attaches", p.status)
    okk, r = a("vm_job_cancel", vm_id=vm, job_id=job2)
    ok(p.wait_close(60) == (1001, "job finished"), "cancel ends it: 1001 "
       "job finished", p.closed)
    p.close()

    tok3 = token()
    tokens.append(tok3)
    # The route secret the grep after the restart looks for.
    with SentSecrets(h) as sent3:
        job3 = exec_job(a, vm, "python3 client.py sleep",
                        broker_pipe_token=tok3)["job_id"]
    # Hibernation: a new vmproxy learns the route again from vmmd.
    p = Pipe(vm, job3, tok3, cred_a)
    ok(p.status == 101, "attached to the third job's pipe", p.status)
    okk, r = a("vm_suspend", vm_id=vm, mode="hibernate", force=True)
    ok(okk, "vm_suspend force, hibernating", r)
    ok(p.wait_close(120) == (1001, "suspended"), "hibernation closes it: "
       "1001 suspended", p.closed)
    p.close()
    okk, r = a("vm_resume", vm_id=vm)
    ok(okk, "vm_resume from hibernation", r)
    p = Pipe(vm, job3, tok3, cred_a)
    ok(p.status == 101, "after hibernation the same token attaches",
       p.status)
    p.close()
    cred_c = h.issue("brk-a", "--max-vms", "2", "--memory-mib", "1024")
    p = Pipe(vm, job3, tok3, cred_c)
    ok(p.status == 101, "attached with a second credential", p.status)
    tf = os.path.join(h.dir, "cred-c")
    with open(tf, "w") as f:
        f.write(cred_c + "\n")
    h.authctl("revoke-token", "--token-file", tf)
    c = p.wait_close(60)
    ok(c is not None and c[0] == 1008, "revoking the credential closes "
       "the pipe: 1008", c)
    p.close()
    cred_e = h.issue("brk-a", "--max-vms", "2", "--memory-mib", "1024",
                     "--ttl", "6s")
    p = Pipe(vm, job3, tok3, cred_e)
    ok(p.status == 101, "attached with a credential about to expire",
       p.status)
    c = p.wait_close(60)
    ok(c is not None and c[0] == 1008, "its expiry closes the pipe: 1008",
       c)
    p.close()
    p = Pipe(vm, job3, tok3, cred_a)
    ok(p.status == 101, "the pipe attaches with a good credential",
       p.status)
    tok4 = token()
    tokens.append(tok4)
    job4 = exec_job(a, vm, "python3 client.py sleep",
                    broker_pipe_token=tok4)["job_id"]
    q = Pipe(vm, job4, tok4, cred_a)
    ok(q.status == 409 and b"max_broker_pipes_per_vm" in q.ws.body,
       "a pipe past max_broker_pipes_per_vm: 409 naming the limit",
       (q.status, q.ws.body[:200]))
    q.close()
    p.close()

    # ---- neither secret survives a vmmd restart --------------------------
    # The grep for job3's secret runs after the restart, over what the
    # hibernations left.
    rc, _ = h.stop_vmmd()
    ok(rc == 0, "vmmd stops, hibernating the VM", rc)
    h.start_vmmd()
    a.reconnect()
    okk, r = a("vm_resume", vm_id=vm)
    ok(okk, "the VM resumes under the new vmmd", r)
    # After two hibernations: the secret is in no checkpoint left behind.
    run_secret_check(h, job3, tok3, sent3)
    st = 503
    for _ in range(30):         # mcpd reconnects to vmmd every second
        q = Pipe(vm, job3, tok3, cred_a)
        st = q.status
        q.close()
        if st != 503:
            break
        time.sleep(1)
    ok(st == 404, "after the restart the old token attaches nothing", st)
    tok5 = token()
    tokens.append(tok5)
    job5 = exec_job(a, vm, "python3 client.py sleep",
                    broker_pipe_token=tok5)["job_id"]
    p = Pipe(vm, job5, tok5, cred_a)
    ok(p.status == 101, "a new job's pipe attaches", p.status)
    okk, r = a("vm_destroy", vm_id=vm)
    ok(okk, "vm_destroy", r)
    ok(p.wait_close(60) == (1001, "destroyed"), "destroy closes it: 1001 "
       "destroyed", p.closed)
    p.close()

    # ---- nothing secret written anywhere ---------------------------------
    needles = [t.encode() for t in tokens]
    hits = grep_tree(needles, [h.mnt, h.run])
    hits += [(path, nd) for path in (h.vmmd_log, h.mcpd_log, h.authd_log)
             for nd in needles if nd in open(path, "rb").read()]
    ok(not hits, "no token in the state directory, the runtime directory "
       "or a log", hits)
    # In the ASan build a memory error in vmmd, vmproxy or mcpd shows here.
    bad = [(p, w) for p in (h.vmmd_log, h.mcpd_log)
           for w in ("AddressSanitizer", "LeakSanitizer", "runtime error:")
           if w in read(p)]
    ok(not bad, "no sanitizer report in vmmd's, vmproxy's or mcpd's log",
       bad)


def run_secret_check(h, job, tok, sent):
    """The route secret vmmd sent for the job is nowhere on disk and in no
    log."""
    sec = sent.secret(job)
    if not ok(sec is not None, "vmmd sent the job's route secret (and so "
              "it can be looked for)", sent.saw(job)):
        return
    hits = grep_tree([sec.encode(), tok.encode()], [h.mnt, h.run])
    hits += [(p, 1) for p in (h.vmmd_log, h.mcpd_log, h.authd_log)
             if sec.encode() in open(p, "rb").read()]
    ok(not hits, "the route secret is in no file and no log", hits)


if __name__ == "__main__":
    main()
