"""The rsync engine: an exact file list, hidden partials, an I/O timeout, classified exit codes.

gpuops computes the list of paths to send itself (gitignore semantics, see rules.py) and hands it
to rsync NUL-separated with --files-from, so odd names never meet a shell or a pattern parser.
`-s` keeps the remote path away from the remote shell. --partial-dir keeps an interrupted file
out of sight but reusable: the next attempt sends only what is missing from it. --timeout turns a
stalled link into exit 30 within seconds instead of a hang, except in one case: a sender that has
written everything and waits for the box counts its own keepalives as I/O (rsync's check_timeout
takes the later of the last read and the last write), and those writes keep succeeding into ssh's
buffers while the link is frozen. So gpuops also watches what rsync reads (STALL_FACTOR): a
healthy rsync reads file data or the other end's messages and keepalives; one that read nothing
for that long is stopped and retried over a new connection. Every path on the list differs at the
destination (gpuops compared digests), so the first attempt passes --ignore-times: rsync's quick
check would skip a file whose size and mtime happen to match and leave it for a repair pass. A
retry after a cut goes back to the quick check, so files the cut attempt finished are not read
again; what it skips wrongly, verification catches and the repair pass resends.

Exit codes (rsync(1)): 10 socket I/O, 12 protocol stream (usually a dropped connection), 30 and
35 timeouts, 255 from ssh itself are transport failures and are retried with backoff; 23 means
some files failed (their errors are reported, not blindly retried); 24 means source files
vanished while being sent (benign for a directory a job is writing); anything else is fatal.
Whatever the code, "No space left on device" in rsync's messages means the destination is full.
"""

import os
import re
import subprocess
import tempfile
import threading
import time

from ..errors import UsageError
from .outcome import DISK_FULL, FATAL, INTERRUPTED, PARTIAL, TRANSPORT, Attempt, Outcome
from .rules import PARTIAL_DIR

RETRYABLE = {
    10: "socket I/O error",
    12: "the data stream broke (connection dropped)",
    30: "no data moved within the I/O timeout",
    35: "timed out waiting for the connection",
    255: "ssh could not connect or lost the connection",
}
STALLED = "nothing came from the other end within the I/O timeout (the link stalled)"
# A live rsync reads something at least every io_timeout/2 s (the other end's keepalives), so
# reading nothing for this many I/O timeouts (and never less than STALL_MIN_S) is a dead link.
STALL_FACTOR = 2
STALL_MIN_S = 5.0
MEANINGS = {
    0: "success", 1: "syntax or usage error", 2: "protocol incompatibility",
    3: "errors selecting input/output files or directories", 4: "requested action not supported",
    5: "error starting the client-server protocol", 11: "file I/O error", 13: "program diagnostics error",
    14: "IPC error", 20: "interrupted by a signal", 21: "waitpid error", 22: "out of memory",
    23: "partial transfer: some files failed", 24: "partial transfer: some source files vanished",
    25: "--max-delete stopped deletions", **RETRYABLE,
}
FULL_MARKS = ("No space left on device", "Disk quota exceeded")

_PROGRESS = re.compile(rb"^\s*([\d,.]+)\s+\d+%")
_FILES = re.compile(rb"xfr#(\d+)")  # files done in this run, on each --info=progress2 line
_STAT = re.compile(rb"^(Literal data|Matched data|Total bytes sent|Total bytes received):\s*([\d,.]+)")
_VANISHED = re.compile(r'file has vanished: "(.*)"')
_ERROR_LINE = re.compile(r"^rsync: (.*)$", re.M)


def classify(code: int, stderr: str):
    """(outcome, meaning) for an rsync exit code and what it printed."""
    if code == 0:
        return "ok", MEANINGS[0]
    if any(m in stderr for m in FULL_MARKS):
        return "disk-full", "the destination ran out of space"
    if code in RETRYABLE:
        return "retry", RETRYABLE[code]
    if code == 23:
        return "partial", MEANINGS[23]
    if code == 24:
        return "vanished", MEANINGS[24]
    if code == 20:
        return "interrupted", MEANINGS[20]
    return "fatal", MEANINGS.get(code, f"rsync exit {code}")


def version(binary="rsync"):
    """(major, minor, patch) of the local rsync, or None when there is none."""
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"version\s+v?(\d+)\.(\d+)\.(\d+)", out)
    return tuple(int(x) for x in m.groups()) if m else None


def _number(raw: bytes) -> int:
    return int(re.sub(rb"[,.]", b"", raw) or b"0")


class Run:
    """One rsync process: feeds progress to a callback, keeps stats and the tail of stderr."""

    # Over a shared (multiplexed) connection the ssh master holds rsync's pipes, not rsync's own
    # ssh: after rsync exits, its output is read only this much longer, never until the master
    # lets go (over a frozen link, most of a minute).
    DRAIN_S = 2.0

    def __init__(self, argv, on_bytes=None, env=None, watch_writes=False, stall_s=None) -> None:
        self.argv, self.on_bytes, self.env = argv, on_bytes, env
        self.watch_writes, self.stall_s = watch_writes, stall_s
        self.stalled = False
        self.progress = 0
        self.completed = 0   # progress at the last finished file
        self.files = 0
        self.stats: dict = {}
        self.stderr = ""
        self.io: dict = {}

    def __call__(self) -> int:
        proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=self.env)
        err, out = proc.stderr, proc.stdout
        assert err is not None and out is not None  # both are pipes
        err_chunks = []
        readers = [threading.Thread(target=lambda: err_chunks.append(err.read()), daemon=True),
                   threading.Thread(target=self._read_stdout, args=(out,), daemon=True)]
        for r in readers:
            r.start()
        if self.watch_writes and self.on_bytes:
            threading.Thread(target=self._watch, args=(proc,), daemon=True).start()
        if self.stall_s:
            threading.Thread(target=self._watch_stall, args=(proc,), daemon=True).start()
        try:
            self.io = _exit_io(proc.pid)
            code = proc.wait()
        except KeyboardInterrupt:
            proc.terminate()
            proc.wait()
            raise
        for r in readers:
            r.join(self.DRAIN_S)
        self.stderr = b"".join(err_chunks).decode("utf-8", "replace")[-65536:]
        return code

    def _read_stdout(self, stream) -> None:
        pending = b""
        while True:
            chunk = stream.read1(65536)
            if not chunk:
                break
            pending += chunk
            *lines, pending = re.split(rb"[\r\n]", pending)
            for line in lines:
                self._line(line)
        self._line(pending)

    def _watch(self, proc) -> None:
        """A sending rsync reports progress only when a new file is done; what it has written
        into ssh so far (/proc/PID/io) keeps the bar moving in between."""
        while _running(proc.pid):
            try:
                with open(f"/proc/{proc.pid}/io") as f:
                    written = int(next(line for line in f if line.startswith("wchar")).split(":")[1])
            except (OSError, StopIteration, ValueError):
                return
            if written > self.progress:
                self.on_bytes(written)
            time.sleep(0.25)

    def _watch_stall(self, proc) -> None:
        """Stop an rsync that has read nothing for stall_s seconds (see the module's docstring)."""
        last, since = -1, time.monotonic()
        while _running(proc.pid):
            read = _tree_reads(proc.pid)
            now = time.monotonic()
            if read is None:
                return  # /proc says nothing here: rsync's own --timeout is all there is
            if read != last:
                last, since = read, now
            elif now - since >= self.stall_s:
                self.stalled = True
                _stop_tree(proc)
                return
            time.sleep(0.25)

    def _line(self, line: bytes) -> None:
        m = _PROGRESS.match(line)
        if m:
            self.progress = _number(m.group(1))
            done = _FILES.search(line)
            if done:
                self.completed = self.progress
                self.files = int(done.group(1))
            if self.on_bytes:
                self.on_bytes(self.progress, self.files)
            return
        m = _STAT.match(line)
        if m:
            self.stats[m.group(1).decode()] = _number(m.group(2))


class RsyncEngine:
    """Carries a list of relative paths between local_root and remote_root, pushing or pulling."""

    name = "rsync"

    def __init__(self, direction, local_root, remote_root, target=None, io_timeout=30, backoff=None,
                 progress=None, rsync_version=None, make_root=False, compress=False) -> None:
        self.direction = direction
        self.local_root = local_root
        self.remote_root = remote_root
        self.target = target
        self.io_timeout = int(io_timeout)
        self.backoff = backoff
        self.progress = progress
        self.modern = (rsync_version or (3, 1, 0)) >= (3, 1, 0)
        self.make_root = make_root and direction == "push" and target is not None
        self.compress = compress

    def argv(self, list_file, force: bool = False) -> list:
        argv = ["rsync", "-lpt", "-s", "--from0", f"--files-from={list_file}",
                f"--partial-dir={PARTIAL_DIR}", f"--timeout={self.io_timeout}", "--stats"]
        if self.modern:
            argv += ["--info=progress2", "--no-h", "--outbuf=N"]
        if force:
            argv.append("--ignore-times")
        if self.compress:
            argv.append("--compress")
        local = self.local_root.rstrip("/") + "/"
        remote = self.remote_root.rstrip("/") + "/"
        if self.target is not None:
            # The target's own ssh command line: same host-key policy and keepalives, and its
            # master connection when it has one (looked up afresh for every attempt). rsync's ssh
            # never becomes a master itself: a backgrounded master would inherit rsync's pipes
            # and outlive a killed attempt.
            ssh = self.target.ssh_argv(control="no")
            argv += ["-e", " ".join(rsh_quote(a) for a in ssh[:-1])]
            remote = remote_path(ssh[-1], remote)
        if self.make_root:
            argv += ["--rsync-path", make_root_then_rsync(self.remote_root)]
        return argv + ([local, remote] if self.direction == "push" else [remote, local])

    def run(self, rels, force: bool = False) -> Outcome:
        outcome = Outcome(self.name, compressed=self.compress)
        if not rels:
            return outcome
        fd, list_file = tempfile.mkstemp(prefix="gpuops-sync-", suffix=".list")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(b"\0".join(r.encode("utf-8", "surrogateescape") for r in rels) + b"\0")
            self._loop(list_file, force, outcome, rels)
        finally:
            os.unlink(list_file)
        return outcome

    def _interrupted(self, run, rels, started) -> int:
        """Best count of the file data an interrupted attempt moved: for a push, what rsync
        wrote into ssh; for a pull, finished files plus the partials it left here."""
        if self.direction == "push":
            return max(run.progress, run.io.get("wchar", 0))
        base = os.fsencode(self.local_root)
        partial = 0
        for rel in rels:
            head, tail = os.path.split(rel.encode("utf-8", "surrogateescape"))
            try:
                st = os.stat(os.path.join(base, head, PARTIAL_DIR.encode(), tail))
            except OSError:
                continue
            if st.st_mtime >= started:
                partial += st.st_size
        return max(run.progress, run.completed + partial)

    def _loop(self, list_file, force: bool, outcome, rels):
        env = {**os.environ, "LC_ALL": "C"}
        while True:
            argv = self.argv(list_file, force=force or not outcome.attempts)
            run = Run(argv, self.progress.update if self.progress else None, env, watch_writes=self.direction == "push",
                      stall_s=max(STALL_MIN_S, STALL_FACTOR * self.io_timeout) if self.target is not None else None)
            started, wall = time.monotonic(), time.time()
            try:
                code = run()
            except KeyboardInterrupt:
                outcome.fail(INTERRUPTED, "interrupted; partial files are kept and the next run resumes them")
                raise
            kind, meaning = ("retry", STALLED) if run.stalled else classify(code, run.stderr)
            sent = run.stats["Literal data"] if "Literal data" in run.stats else self._interrupted(run, rels, wall)
            outcome.attempts.append(Attempt(code, kind, meaning, round(time.monotonic() - started, 3), sent,
                                            _last_error(run.stderr)))
            outcome.bytes_sent += sent
            outcome.bytes_reused += run.stats.get("Matched data", 0)
            wire = "Total bytes sent" if self.direction == "push" else "Total bytes received"
            outcome.wire_bytes += run.stats.get(wire, sent)
            if kind == "ok":
                return
            if kind == "vanished":
                outcome.vanished = _VANISHED.findall(run.stderr)
                return
            if kind == "retry":
                if self.progress:
                    self.progress.note(f"rsync: {meaning}; retrying")
                if self.target is not None:
                    # The link that failed may be the target's shared connection: retry on a new one.
                    self.target.drop_link()
                if self.backoff is not None and self.backoff.wait():
                    continue
                outcome.fail(TRANSPORT, f"rsync kept failing ({meaning}, exit {code}) after "
                                        f"{len(outcome.attempts)} attempts: {_last_error(run.stderr)}")
                return
            if kind == "partial":
                outcome.file_errors = _ERROR_LINE.findall(run.stderr)[:50]
                outcome.fail(PARTIAL, f"rsync could not transfer some files: {_last_error(run.stderr)}")
                return
            if kind == "disk-full":
                outcome.fail(DISK_FULL, f"the destination filled up: {_full_line(run.stderr)}")
                return
            outcome.fail(INTERRUPTED if kind == "interrupted" else FATAL,
                         f"rsync exit {code} ({meaning}): {_last_error(run.stderr)}")
            return


def rsh_quote(arg: str) -> str:
    """Quote one word for rsync's -e parser (spaces split words; '' and "" group; no backslashes)."""
    if arg and not any(c in arg for c in " '\"\t"):
        return arg
    if "'" not in arg:
        return f"'{arg}'"
    if '"' not in arg:
        return f'"{arg}"'
    raise UsageError(f"cannot pass {arg!r} to rsync's ssh command: it holds both quote characters")


def remote_path(host: str, path: str) -> str:
    """rsync's HOST:PATH (an IPv6 address in brackets)."""
    return f"[{host}]:{path}" if ":" in host else f"{host}:{path}"


def make_root_then_rsync(root) -> str:
    """A --rsync-path that creates the destination (all levels) before the receiving rsync
    starts: creating it is part of the push, and doing it inside rsync's own connection saves
    the handshake a separate `mkdir` would cost. rsync appends its server arguments, which
    reach rsync as "$@"; the remote login shell sees one sh -c line, quoted like every other."""
    from ..remote import wrap

    return "sh -c " + wrap.quote("mkdir -p -- " + wrap.quote(root) + ' && exec rsync "$@"') + " rsync"


def _children(pid: int):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except (OSError, ValueError):
        return []


def _tree_reads(pid: int):
    """Bytes read so far by rsync and its rsync children (a pull's receiver is one), leaving out
    its ssh: ssh reads rsync's keepalives even from a frozen link. None where /proc cannot tell."""
    total = 0
    for p in [pid] + _children(pid):
        try:
            with open(f"/proc/{p}/comm") as f:
                if f.read().strip() != "rsync":
                    continue
            with open(f"/proc/{p}/io") as f:
                total += int(next(line for line in f if line.startswith("rchar")).split(":")[1])
        except (OSError, StopIteration, ValueError):
            if p == pid:
                return None
    return total


def _stop_tree(proc, grace_s=2.0) -> None:
    """SIGTERM rsync and its children (its ssh would otherwise wait on the frozen link), then
    SIGKILL what is left: rsync keeps its partial files on either."""
    import signal

    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in _children(proc.pid) + [proc.pid]:
            try:
                os.kill(p, sig)
            except OSError:
                pass
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            if not _running(proc.pid):
                return
            time.sleep(0.05)


def _running(pid: int) -> bool:
    """Whether child `pid` has not exited yet, without reaping it: the main thread reads its
    /proc io counters after it exits (see _exit_io), which a reaped child no longer has."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is None
    except ChildProcessError:
        return False


def _exit_io(pid: int) -> dict:
    """/proc/PID/io of a child that has exited but is not reaped yet ({} where unavailable).

    rsync prints progress at most once a second and no stats when it fails, so for an
    interrupted push the bytes it wrote into ssh are the honest count of what it sent."""
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        with open(f"/proc/{pid}/task/{pid}/io") as f:  # the process itself, not its reaped ssh child
            return {k: int(v) for k, v in (line.split(":") for line in f if ":" in line)}
    except (OSError, AttributeError, ValueError):
        return {}


def _last_error(stderr: str) -> str:
    if not stderr.strip():
        return ""
    lines = [l.strip() for l in stderr.splitlines() if l.strip()]
    errors = [l for l in lines if l.startswith(("rsync:", "rsync error", "ssh:")) or "Connection" in l]
    return (errors or lines or ["(no message)"])[-1][:400]


def _full_line(stderr: str) -> str:
    for line in stderr.splitlines():
        if any(m in line for m in FULL_MARKS):
            return line.strip()[:400]
    return _last_error(stderr)
