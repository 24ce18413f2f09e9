"""Copies that may outlast a tool call, as requests an agent waits on or cancels (SkyPilot's request
ids, `gh run watch`).

A push, pull or verify through MCP runs as the CLI verb itself, `gpuops VERB ... --json`, in its
own process group, its flags made from the tool's arguments by their description (gpuops.surface),
each as `--flag=VALUE` so that no value is read as a flag, and the level checked on that argv.
The call waits up to its `wait_s`: the copy's own envelope when it ended by then, else a running
answer with its request_id, and request_wait on that id waits again (each call bounded, returning
the moment the copy ends). request_cancel sends the group SIGINT, as Ctrl-C at a terminal does: the
copy stops where it is, partial files kept for the next run to resume, and nothing claimed: no
verified result, no pull recorded for teardown_check. Its answer is how the copy ended (its exit
status and its own envelope: stopped, or already finished and verified, or failed first), never
what the cancel meant, since a copy may finish a moment before the signal reaches it. (A server
started with SIGINT ignored would pass that on to its copies: gpuops.mcp.main sees to it that it
does not.) A request's process is this server's: the requests end with it, and the last MOST_KEPT
finished ones are remembered for an hour.
"""

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time

from mcp.server.mcpserver import Context

from .. import errors, surface
from ..envelope import envelope
from ..surface import model as M

MOST_KEPT = 32
KEEP_S = 3600.0
CANCEL_WAIT_S = 10.0
ANSWER_BYTES = 8 << 20  # an envelope is far smaller; a copy that prints more is cut here
_POLL_S = 0.1
_requests = {}
_lock = threading.Lock()


def cli_argv(tool: str, args: dict) -> list:
    """`gpuops VERB ...` for a tool call: each argument as the flag its description says it is,
    always `--flag=VALUE` (a switch bare), so no value an agent sends, a list item `--delete`
    included, is ever read as a flag (both of the CLI's readers take what follows '=' as the value)."""
    spec = surface.tool(tool)
    flags = {a.name: flag for flag, a in surface.flags_of(tool).items()}
    argv = [spec.verb]
    for arg in surface.args(tool):
        value = args.get(arg.name)
        if arg.name not in flags or value in (None, False, [], {}):
            continue
        flag = flags[arg.name]
        if arg.kind == M.SWITCH:
            argv.append(flag)
        elif arg.kind in (M.LIST, M.STATES):
            argv += [f"{flag}={v}" for v in value]
        elif arg.kind == M.PAIRS:
            argv += [f"{flag}={k}={v}" for k, v in value.items()]
        elif arg.kind == M.CSV:
            argv.append(f"{flag}={','.join(value)}")
        else:
            argv.append(f"{flag}={value:g}" if isinstance(value, float) else f"{flag}={value}")
    if any("\0" in w for w in argv):
        raise errors.UsageError(f"{tool}: a value holds a NUL byte, which no command line can carry")
    return argv


def checked(tool: str, argv: list) -> dict:
    """{flag: [values]} of the command line the copy will run (a switch's value is True), and the
    server's level held to it. This is where the copy starts, so a deletion its parameters did not
    show (a flag smuggled in a value) is refused here too, and applying one needs `yes` with the
    plan it applies. Read as the CLI reads it: a word is `--flag=VALUE` or a bare switch
    (tests/test_mcp_argv.py holds the CLI's reader to this reading)."""
    from . import toolsets as sets

    verb = surface.verb(surface.tool(tool).verb)
    flag_of = {p.name: p.flag for p in verb.params}
    given = {}
    for word in argv[1:]:
        flag, eq, value = word.partition("=")
        given.setdefault(flag, []).append(value if eq else True)
    if flag_of.get("delete") in given:
        sets.refuse(verb.name, M.ENDS)
        if flag_of["yes"] in given and not given.get(flag_of["plan"]):
            raise errors.UsageError(f"{tool}: yes applies a plan: call {tool} with delete and without yes, read its "
                                    "plan, then again with yes and the plan_id it showed")
    return given


class Request:
    def __init__(self, tool, verb, argv, what) -> None:
        self.id = "req-" + secrets.token_hex(6)
        self.tool, self.verb, self.argv, self.what = tool, verb, argv, what
        self.started = time.monotonic()
        self.ended = None
        self.cancelled = False
        self._out, self._err = bytearray(), bytearray()
        self.proc = subprocess.Popen([sys.executable, "-m", "gpuops", *argv, "--json"], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        self._readers = [threading.Thread(target=self._read, args=(s, b), daemon=True)
                         for s, b in ((self.proc.stdout, self._out), (self.proc.stderr, self._err))]
        for r in self._readers:
            r.start()

    @staticmethod
    def _read(stream, into) -> None:
        for chunk in iter(lambda: stream.read1(65536), b""):
            if len(into) < ANSWER_BYTES:
                into.extend(chunk[:ANSWER_BYTES - len(into)])

    def done(self) -> bool:
        if self.ended is None and self.proc.poll() is not None:
            for r in self._readers:
                r.join(2.0)
            self.ended = time.monotonic()
        return self.ended is not None

    def elapsed(self) -> float:
        return (self.ended or time.monotonic()) - self.started

    def cancel(self) -> None:
        """SIGINT to the copy's process group, as a terminal's Ctrl-C; SIGKILL if it lingers."""
        self.cancelled = True
        if self.proc.poll() is None:
            _signal(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(CANCEL_WAIT_S)
            except subprocess.TimeoutExpired:
                _signal(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.done()

    def answer(self) -> dict:
        """The copy's own envelope once it ended (its request_id added), else where it stands; after
        a cancel, what the copy's end says happened (_after_cancel), never what the cancel meant."""
        data = {"request_id": self.id, "state": "running", "elapsed_s": round(self.elapsed(), 1)}
        if not self.done():
            running = envelope(self.verb, ok=False, data=data,
                               summary=f"{self.what}: still running after {data['elapsed_s']:g}s (request {self.id})")
            return dict(running, next=[_waits(self.id)])
        try:
            doc = json.loads(bytes(self._out).decode("utf-8", "surrogateescape"))
        except ValueError:
            doc = None
        if self.cancelled:
            return self._after_cancel(doc, data)
        if doc is None:
            said = bytes(self._err).decode("utf-8", "replace").strip().splitlines()
            return envelope(self.verb, ok=False, data=dict(data, state="failed"),
                            summary=f"{self.what}: ended (exit {self.proc.returncode}) without an answer: "
                                    f"{(said or ['no message'])[-1][:300]}",
                            error={"kind": "internal", "message": "the copy gave no envelope"})
        return _with_id(doc, self.id)

    def _after_cancel(self, doc: dict | None, data: dict) -> dict:
        """How the copy ended once cancelled: finished and verified before the signal reached it
        (its own answer, which stands), stopped by it (nothing claimed), killed after ignoring it,
        or failed on its own first (its own answer)."""
        code, took = self.proc.returncode, f"{data['elapsed_s']:g}s"
        verified = bool(doc and isinstance(doc.get("data"), dict) and doc["data"].get("verified"))
        if doc is not None and (verified or code == errors.OK):
            out = _with_id(doc, self.id, cancel="too-late")
            return dict(out, summary=f"{self.what}: it had already finished when the cancel came, so its answer "
                                     f"stands: {doc.get('summary')}")
        if code in (errors.INTERRUPTED["SIGINT"], -signal.SIGINT):
            return envelope(self.verb, ok=False, data=dict(data, state="cancelled", cancel="stopped"),
                            summary=f"{self.what}: cancelled after {took}: the copy stopped before claiming anything "
                                    "(no verified result, no pull recorded; partial files are kept: the same call "
                                    "resumes)")
        if code == -signal.SIGKILL:
            return envelope(self.verb, ok=False, data=dict(data, state="cancelled", cancel="killed"),
                            summary=f"{self.what}: killed {CANCEL_WAIT_S:g}s after a cancel it did not stop on; "
                                    "nothing is verified: data_verify says where the destination stands")
        said = doc.get("summary") if doc else f"exit {code} without an answer"
        return envelope(self.verb, ok=False, data=dict(data, state="failed", cancel="failed-first"),
                        summary=f"{self.what}: it had failed on its own before the cancel: {said}",
                        error=(doc or {}).get("error") or {"kind": "internal", "message": "the copy gave no envelope"})


def _with_id(doc: dict, request_id: str, **more) -> dict:
    if isinstance(doc.get("data"), dict):
        return dict(doc, data=dict(doc["data"], request_id=request_id, **more))
    return doc


def _signal(pid: int, sig) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _waits(request_id) -> dict:
    # a step of the server's own tool: no CLI verb is made of it, so it is a tool call already
    return {"tool": "request_wait", "args": {"request_id": request_id}, "why": "returns when the copy ends, or at "
                                                                               "the timeout"}


def _forget() -> None:
    """Drop finished requests beyond MOST_KEPT or older than KEEP_S (called under _lock)."""
    ended = sorted((r for r in _requests.values() if r.done()), key=lambda r: r.ended)
    now = time.monotonic()
    for r in ended[:max(0, len(ended) - MOST_KEPT)] + [r for r in ended if now - r.ended > KEEP_S]:
        _requests.pop(r.id, None)


def start(tool, args, what) -> Request:
    argv = cli_argv(tool, args)
    checked(tool, argv)
    made = Request(tool, surface.tool(tool).verb, argv, what)
    with _lock:
        _forget()
        _requests[made.id] = made
    return made


def find(request_id) -> Request:
    with _lock:
        found = _requests.get(request_id)
    if found is None:
        raise errors.NotFound(f"no request {request_id!r} on this server (a finished one is kept for an hour)")
    return found


async def waited(ctx, request, timeout_s):
    """The request's answer once it ended or `timeout_s` passed, with a progress notification every
    gpuops.mcp.adapter.PROGRESS_EVERY_S meanwhile."""
    import anyio

    from .adapter import PROGRESS_EVERY_S

    deadline, beat = time.monotonic() + timeout_s, time.monotonic() + PROGRESS_EVERY_S
    while not request.done() and time.monotonic() < deadline:
        await anyio.sleep(_POLL_S)
        if time.monotonic() >= beat and ctx is not None:
            beat += PROGRESS_EVERY_S
            await ctx.report_progress(request.elapsed(), None, f"{request.what}: running for {request.elapsed():.0f}s")
    return request.answer()


def _unknown(verb: str, request_id: str) -> dict:
    """The answer for an id this server does not know: not-found, and a wait on each request it
    does know (the newest first), since the agent may have mistyped or mixed up an id; with none,
    it says there is no call to make."""
    with _lock:
        known = sorted(_requests.values(), key=lambda r: r.started, reverse=True)[:MOST_KEPT]
    err = errors.NotFound(f"no request {request_id!r} on this server (a request lives in the server that started "
                          "it, and a finished one is kept for an hour)")
    doc = envelope(verb, ok=False, summary=err.message, error=err.as_dict(), advice=[] if known else [
        "No next step: this server holds no copy now; the same data_push, data_pull or data_verify call again "
        "starts it anew (a push or pull resumes from the files already there)"])
    return dict(doc, next=[dict(_waits(r.id), why=f"{r.what} ({'ended' if r.done() else 'running'})")
                           for r in known])


async def request_wait(ctx: Context, request_id, timeout_s):
    try:
        found = find(request_id)
    except errors.NotFound:
        return _unknown("request_wait", request_id)
    return await waited(ctx, found, timeout_s)


def request_cancel(request_id):
    try:
        found = find(request_id)
    except errors.NotFound:
        return _unknown("request_cancel", request_id)
    if found.done() and not found.cancelled:
        return dict(found.answer(), summary=f"{found.what}: it had already ended, so there was nothing to cancel; "
                                            "its answer follows: " + found.answer()["summary"])
    found.cancel()
    return found.answer()



TOOLS = (request_wait, request_cancel)
