"""The box's resident helper (gpuops.onbox.helper.resident, gpuops.remote.resident), against a real sshd:
armed by a master's second call, then calls without exec channels that answer exactly as exec
channels do; a helper that is gone, a deadline, a caller that hangs up, idling out, a frozen
link, another user, and a box that sends what no helper would."""

import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from gpuops import onbox
from gpuops.onbox.helper import resident as helper
from gpuops.onbox.helper.wire import HELLO
from gpuops.remote import hostspec, mux, resident
from gpuops.remote.targets import target_for
from gpuops.remote.base import OUTPUT_BYTES
from gpuops.remote.wrap import KILL_AFTER_S
from tests.test_interpreter_cache import ShimBox, _open_master
from tests.conftest import kept_masters
from tests.onboxsrc import needed_imports

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def reuse(monkeypatch):
    """Kept masters with the resident helper on."""
    with kept_masters(monkeypatch, "gh-") as runtime:
        yield runtime


@pytest.fixture
def box_runtime():
    """The box's XDG_RUNTIME_DIR: its helpers' sockets go here, and leave when it goes."""
    path = tempfile.mkdtemp(prefix="gb-")
    yield path
    shutil.rmtree(path, ignore_errors=True)  # a helper whose socket is gone exits within a second


def _box(rig, name, box_runtime):
    return rig.box(name, env={"XDG_RUNTIME_DIR": box_runtime})


def _armed_box(rig, name, box_runtime):
    """A box whose master has made two calls: the second armed its helper."""
    box = _box(rig, name, box_runtime)
    _ask(box.spec)
    _ask(box.spec)
    _armed(box.spec)
    return box


def _ask(spec, root=ROOT / "gpuops" / "onbox"):
    """One on-box call as a separate gpuops call would make it: its own target."""
    t = target_for(spec)
    try:
        return t.run_onbox("manifest", stdin=json.dumps({"root": str(root), "hash": "all"}).encode())
    finally:
        t.close()


def _master(spec):
    return mux.socket_path(mux.shared_dir(), hostspec.resolve(spec), None)


def _armed(spec):
    """The forward's local socket once a helper is armed on this host's master (waits a little:
    arming runs beside the call that started it)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        path = resident.forward_for(_master(spec))
        if path:
            return path
        time.sleep(0.05)
    raise AssertionError("no helper was armed")


def _helper_pids(box_runtime):
    """The helpers listening in this box's runtime dir (found by their sockets' tokens)."""
    tokens = [n[2:-5] for n in os.listdir(os.path.join(box_runtime, "gpuops"))] if os.path.isdir(
        os.path.join(box_runtime, "gpuops")) else []
    pids = []
    for token in tokens:
        out = subprocess.run(["pgrep", "-f", token], capture_output=True, text=True).stdout
        pids += [int(p) for p in out.split()]
    return pids


def _direct(spec, src, args=(), stdin=b"", timeout_s=30):
    """Run python source `src` on the armed helper through a target's own call machinery."""
    t = target_for(spec)
    try:
        path = _armed(spec)
        return t._call(lambda: resident.open_call(path, src.encode(), args, timeout_s, 5), stdin, timeout_s, None,
                       OUTPUT_BYTES, False, None)
    finally:
        t.close()


def test_a_masters_second_call_arms_the_helper_and_later_calls_open_no_exec_channel(rig, reuse, box_runtime, cli):
    box = _box(rig, "res-many", box_runtime)
    first = _ask(box.spec)
    _ask(box.spec)
    _armed(box.spec)
    before = box.exec_requests()
    answers = [_ask(box.spec) for _ in range(3)]
    r = cli("status", "--host", box.spec, "--json", env=os.environ.copy())
    assert r.returncode == 0, r.stderr
    assert box.exec_requests() == before, "calls on an armed master are forks on the box, not exec channels"
    assert all(a["entries"] == first["entries"] for a in answers), "the helper answers as an exec channel does"
    assert json.loads(r.stdout)["ok"] is True


def _arms_asked(monkeypatch):
    """The arms asked for from now on (arming is detached: its result may come after the test looks)."""
    asked = []
    monkeypatch.setattr(resident, "arm_later", lambda *a: asked.append(a))
    return asked


def test_the_first_call_of_a_master_arms_nothing(rig, reuse, box_runtime, monkeypatch):
    box = _box(rig, "res-first", box_runtime)
    asked = _arms_asked(monkeypatch)
    before = box.exec_requests()
    _ask(box.spec)
    assert box.exec_requests() - before == 1 and resident.forward_for(_master(box.spec)) is None
    assert asked == []
    _ask(box.spec)
    assert len(asked) == 1, "the master's second call asks for one"


def test_stdin_stdout_stderr_argv_and_status_travel_as_over_an_exec_channel(rig, reuse, box_runtime):
    box = _armed_box(rig, "res-streams", box_runtime)
    src = ("import sys\n"
           "data = sys.stdin.buffer.read()\n"
           "sys.stdout.buffer.write(data * 3)\n"
           "sys.stderr.write('args=' + ','.join(sys.argv[1:]) + '\\n')\n"
           "sys.exit(3)\n")
    payload = os.urandom(700_000)
    result = _direct(box.spec, src, args=["a b", "$(touch x)"], stdin=payload)
    assert result.stdout == payload * 3
    assert result.stderr == b"args=a b,$(touch x)\n"
    assert result.exit == 3


def test_a_worker_finds_the_standard_modules_the_shipped_code_imports_loaded(rig, reuse, box_runtime):
    # Imported once by the helper, not by every call before its entry starts: a probe's
    # nvidia-smi queries waited on subprocess's import.
    box = _armed_box(rig, "res-warm", box_runtime)
    wanted = ("subprocess", "shutil", "hashlib", "fcntl")
    result = _direct(box.spec, f"import sys\nprint(','.join(m for m in {wanted!r} if m in sys.modules))\n")
    assert result.stdout.decode().strip() == ",".join(wanted)


def test_an_uncaught_exception_is_reported_as_python_reports_it(rig, reuse, box_runtime):
    box = _armed_box(rig, "res-raise", box_runtime)
    result = _direct(box.spec, "raise RuntimeError('boom')\n")
    assert result.exit == 1 and b"RuntimeError: boom" in result.stderr


def test_the_deadline_stops_the_worker_and_everything_it_started(rig, reuse, box_runtime):
    box = _armed_box(rig, "res-deadline", box_runtime)
    src = ("import subprocess, sys, time\n"
           "child = subprocess.Popen(['sleep', '300'])\n"
           "print(child.pid, flush=True)\n"
           "time.sleep(300)\n")
    started = time.monotonic()
    result = _direct(box.spec, src, timeout_s=1)
    assert result.exit == 124, result
    assert time.monotonic() - started < 1 + KILL_AFTER_S
    grandchild = int(result.stdout)
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild), "the worker's process group is stopped with it"


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def test_a_caller_that_hangs_up_ends_its_worker(rig, reuse, box_runtime):
    box = _armed_box(rig, "res-hangup", box_runtime)
    call = resident.open_call(_armed(box.spec), b"import os, time\nprint(os.getpid(), flush=True)\ntime.sleep(300)\n",
                              (), 300, 5)
    call.stdin.close()
    worker = int(call.stdout.read1(100))
    assert _alive(worker)
    call.kill()
    assert call.wait() == -1
    deadline = time.monotonic() + 5
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(worker)


def test_a_helper_that_is_gone_costs_one_exec_call_and_is_armed_again(rig, reuse, box_runtime):
    box = _armed_box(rig, "res-gone", box_runtime)
    old = _armed(box.spec)
    for pid in _helper_pids(box_runtime):
        os.kill(pid, signal.SIGKILL)
    before = box.exec_requests()
    assert _ask(box.spec)["exists"] is True, "the call itself succeeds, over an exec channel"
    new = _armed(box.spec)
    assert new != old and box.exec_requests() - before == 2  # the call, and the new helper's start
    before = box.exec_requests()
    _ask(box.spec)
    assert box.exec_requests() == before


def test_a_killed_master_takes_its_forward_and_the_next_master_arms_its_own(rig, reuse, box_runtime):
    box = _armed_box(rig, "res-master", box_runtime)
    old = _armed(box.spec)
    os.kill(_master_pid(box.spec), signal.SIGKILL)
    time.sleep(0.2)
    assert _ask(box.spec)["exists"] is True
    assert resident.forward_for(_master(box.spec)) is None, "a forward is only used on the master that made it"
    _ask(box.spec)
    assert _armed(box.spec) != old


def test_an_idle_helper_exits_and_removes_its_socket(rig, reuse, box_runtime, monkeypatch):
    monkeypatch.setenv("GPUOPS_SSH_PERSIST", "2")
    _armed_box(rig, "res-idle", box_runtime)
    pids = _helper_pids(box_runtime)
    assert pids
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids)
    assert os.listdir(os.path.join(box_runtime, "gpuops")) == []


def test_a_frozen_link_under_the_helper_is_dropped_and_the_call_goes_over_a_fresh_one(rig, reuse, box_runtime):
    box = _armed_box(rig, "res-frozen", box_runtime)
    old_master = _master_pid(box.spec)
    frozen = subprocess.run(["pgrep", "-P", str(box.proc.pid)], capture_output=True, text=True).stdout.split()
    for pid in frozen:
        os.kill(int(pid), signal.SIGSTOP)
    started = time.monotonic()
    try:
        assert _ask(box.spec)["exists"] is True
    finally:
        for pid in frozen:
            os.kill(int(pid), signal.SIGKILL)
    # the greeting is awaited for the connect timeout (5 s in the rig's ssh_config), then a handshake
    # and the call: well inside the call's own deadline (60 s, past which a stuck link would hang)
    assert time.monotonic() - started < 5 + 10
    assert not _alive(old_master), "the stuck master was ended, not left for the next call"
    assert _master_pid(box.spec) not in (None, old_master)


def _master_pid(spec):
    out = subprocess.run(["ssh", "-o", f"ControlPath={_master(spec)}", "-O", "check", "x"], capture_output=True,
                         text=True).stderr
    return int(out.split("pid=")[1].split(")")[0]) if "pid=" in out else None


def test_gpuops_resident_0_keeps_every_call_on_exec_channels(rig, reuse, box_runtime, monkeypatch):
    monkeypatch.setenv("GPUOPS_RESIDENT", "0")
    box = _box(rig, "res-off", box_runtime)
    asked = _arms_asked(monkeypatch)
    before = box.exec_requests()
    for _ in range(3):
        _ask(box.spec)
    assert box.exec_requests() - before == 3 and resident.forward_for(_master(box.spec)) is None
    assert asked == []


def test_the_helper_starts_as_a_job_does_so_its_workers_have_what_the_shim_sets(rig, reuse, tmp_path):
    shimmed = ShimBox(rig, "res-shim", Path(tempfile.mkdtemp(prefix="gs-")))
    try:
        _open_master(shimmed.spec)
        _ask(shimmed.spec)
        result = _direct(shimmed.spec, "import os, sys\nprint(os.environ.get('SHIM_VERSION'), sys.executable)\n")
        assert result.stdout.decode().split() == ["a", str(shimmed.home / "versions" / "a" / "bin" / "python3")]
        assert shimmed.shim_runs() == 2  # the call that learned the interpreter, and the helper's start
    finally:
        shutil.rmtree(shimmed.home.parent, ignore_errors=True)


def test_jobs_never_start_under_the_helper():
    assert {"job_launch", "job_queue", "resident"} <= onbox.STARTS_JOBS


# The box's site-packages: what the probe and a gang's preflight look for (torch, pynvml) lives
# there. The helper runs as `python3 -S`; its workers once did too, so a preflight said "torch is
# not installed" through the helper and NOT READY over an exec channel, and every gang launch was
# refused with "cannot import torch" once a master had armed a helper.

_FIND_SPEC = re.compile(r"find_spec\(\s*[\"'](\w+)")


# Entries whose NVML readings (a tried `import pynvml`) give the verdicts preflight gives too: free
# GPUs, a holder's memory. A job action that only samples the GPUs (run telemetry, the --gpus check)
# reads nvidia-smi under python3 -S on every path instead, so no path changes its answer.
NVML_VERDICTS = {"reap", "fleet_facts"}
# Entries that measure with torch where the box has it (a tried `import torch`) and say what they
# could not measure where it has not: qualify.
TORCH_MEASURES = {"qualify"}


def _beyond_stdlib(entry):
    """The modules outside the standard library that `entry`, or anything it ships, cannot run
    without or looks for: inside functions and child interpreters' source too."""
    found = set()
    for name in onbox.closure(entry):
        src = onbox._source(name)
        found |= needed_imports(src) | set(_FIND_SPEC.findall(src))
    return {n for n in found if n and n not in sys.stdlib_module_names}


def _torch_box(rig, name, box_runtime, tmp):
    """A box with fake GPUs whose python3 is the one running the tests (real torch, CPU wheel, in
    its site-packages, where only `site` puts it on sys.path). Its HOME has no shell rc: the login
    shell sources ~/.bashrc for an exec channel, and a user's rc that puts pyenv's shims first
    would answer with another interpreter, one with torch only where it was installed by hand."""
    from tests.fixtures.fakegpu.boxes import compose

    bin_dir, home = tmp / "bin", tmp / "home"
    bin_dir.mkdir()
    home.mkdir()
    (bin_dir / "python3").write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    (bin_dir / "python3").chmod(0o755)
    _, env = compose(tmp, "v2-healthy", "healthy")
    env.update(PATH=f"{bin_dir}:{env['PATH']}", XDG_RUNTIME_DIR=box_runtime, HOME=str(home))
    return rig.box(name, env=env)


_WHERE_SITE = ("import importlib.util, json, sys\n"
               "print(json.dumps({'torch': importlib.util.find_spec('torch') is not None,"
               " 'prefix': sys.prefix,"
               " 'site_packages': [p for p in sys.path if p.endswith(('site-packages', 'dist-packages'))]}))\n")


def test_every_entry_that_needs_the_boxs_site_packages_gets_them_on_every_path(rig, reuse, box_runtime, tmp_path,
                                                                              monkeypatch):
    needs = {e for e in onbox.entries() if _beyond_stdlib(e)}
    assert needs | NVML_VERDICTS | TORCH_MEASURES == set(onbox.NEEDS_SITE), \
        "an entry that imports beyond the stdlib must be in NEEDS_SITE"
    assert {"probe", "gang_facts"} <= needs
    box = _torch_box(rig, "res-site", box_runtime, tmp_path)
    _ask(box.spec)
    _ask(box.spec)
    _armed(box.spec)
    # Every entry, routed by its name as gpuops routes it, runs a stand-in that says what it sees.
    monkeypatch.setattr(onbox, "script", lambda entry: _WHERE_SITE.encode())

    def seen_by_every_entry():
        t = target_for(box.spec)
        try:
            results = {e: t.ship(e, timeout_s=30) for e in onbox.entries()}
            failed = {e: (r.exit, r.stderr[-300:]) for e, r in results.items() if r.exit}
            assert not failed
            return {e: json.loads(r.stdout) for e, r in results.items()}
        finally:
            t.close()

    monkeypatch.setenv("GPUOPS_RESIDENT", "0")
    exec_channels = seen_by_every_entry()
    monkeypatch.delenv("GPUOPS_RESIDENT")
    before = box.exec_requests()
    helper_path = seen_by_every_entry()
    assert box.exec_requests() - before == len(onbox.STARTS_JOBS), "all but the job starters rode the helper"
    for entry in onbox.entries():
        assert helper_path[entry] == exec_channels[entry], entry
        if entry in needs:  # under -S a venv's prefix is its base's: only `site` reads pyvenv.cfg
            assert exec_channels[entry]["prefix"] == sys.prefix, (entry, "the box ran another python3")
            assert exec_channels[entry]["torch"] and exec_channels[entry]["site_packages"], entry


def _verdict(doc):
    """Whether it passed, and every finding: what failed or warned with its words (an ok finding's
    title holds figures that move between two calls: free space, uptime)."""
    return doc["ok"], sorted((f["id"], f["severity"], f["title"] if f["severity"] != "ok" else "")
                             for f in doc["findings"])


def test_a_preflight_says_the_same_through_the_helper_as_over_an_exec_channel(rig, reuse, box_runtime, tmp_path,
                                                                             monkeypatch):
    from gpuops.ops import preflight as op

    box = _torch_box(rig, "res-preflight", box_runtime, tmp_path)

    def preflight(state):
        monkeypatch.setenv("GPUOPS_STATE_DIR", str(tmp_path / state))  # torch imported afresh each time
        t = target_for(box.spec)
        try:
            return op.preflight(t)
        finally:
            t.close()

    monkeypatch.setenv("GPUOPS_RESIDENT", "0")
    exec_channel = preflight("a")
    monkeypatch.delenv("GPUOPS_RESIDENT")
    _ask(box.spec)
    _ask(box.spec)
    _armed(box.spec)
    before = box.exec_requests()
    helper = preflight("b")
    assert box.exec_requests() == before, "the probe rode the helper"
    assert exec_channel["data"]["torch"]["installed"] is True
    assert helper["data"]["torch"] == exec_channel["data"]["torch"]
    assert _verdict(helper) == _verdict(exec_channel)


# The helper on this machine, without sshd: what it lets in and where it listens.

def _start_local_helper(runtime):
    src = onbox.script("resident")
    env = {**os.environ, "XDG_RUNTIME_DIR": runtime}
    out = subprocess.run([sys.executable, "-c", "import sys; n=int(sys.argv.pop(1)); "
                          "exec(compile(sys.stdin.buffer.read(n), 'r', 'exec'), {'__name__': '__main__'})",
                          str(len(src)), "ab" * 16, "30"], input=src, capture_output=True, env=env, timeout=30)
    doc = json.loads(out.stdout)
    assert doc["ok"], doc
    return doc


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to connect as another user")
def test_a_connection_from_another_user_gets_no_greeting(tmp_path):
    runtime = tempfile.mkdtemp(prefix="gl-")
    doc = _start_local_helper(runtime)
    try:
        # Open the way in on purpose: the directory's mode is the first guard, the peer check the second.
        os.chmod(runtime, 0o711)
        os.chmod(os.path.dirname(doc["socket"]), 0o711)
        os.chmod(doc["socket"], 0o666)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                os.setgid(65534)
                os.setuid(65534)
                s = socket.socket(socket.AF_UNIX)
                s.settimeout(5)
                s.connect(doc["socket"])
                os.write(w, s.recv(100) or b"<eof>")
            except BaseException as e:  # noqa: BLE001 - reported to the test through the pipe
                os.write(w, repr(e).encode())
            os._exit(0)
        os.close(w)
        os.waitpid(pid, 0)
        assert os.read(r, 100) == b"<eof>"
        mine = socket.socket(socket.AF_UNIX)
        mine.settimeout(5)
        mine.connect(doc["socket"])
        assert mine.recv(100) == HELLO, "its own user is greeted"
        mine.close()
    finally:
        os.kill(doc["pid"], signal.SIGTERM)
        shutil.rmtree(runtime, ignore_errors=True)


def test_the_helper_listens_only_in_a_directory_no_one_else_can_enter(tmp_path, monkeypatch):
    good = tmp_path / "good"
    good.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(good))
    assert helper.runtime_dir() == str(good / "gpuops")
    assert oct(os.stat(good / "gpuops").st_mode & 0o777) == "0o700"
    os.chmod(good / "gpuops", 0o755)
    assert helper.runtime_dir() is None, "a directory others can enter is refused, not repaired"
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(shared))
    assert not (helper.runtime_dir() or "").startswith(str(shared))


# What a box could send instead of a helper's frames.

def _fake_helper(tmp_path, reply):
    path = str(tmp_path / "fake.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(1)

    def serve():
        conn, _ = listener.accept()
        conn.sendall(reply)
        time.sleep(0.5)
        conn.close()
        listener.close()

    threading.Thread(target=serve, daemon=True).start()
    return path


# "gpuops-resident 1": a helper armed by a gpuops before requests said which calls need site-packages
@pytest.mark.parametrize("reply", [b"", b"SSH-2.0-OpenSSH\r\n", b"gpuops-resident 1\n", b"gpuops-resident 3\n"],
                         ids=["eof", "other", "older-version", "newer-version"])
def test_no_greeting_means_nothing_ran(tmp_path, reply):
    with pytest.raises(resident.NothingRan):
        resident.open_call(_fake_helper(tmp_path, reply), b"print(1)", (), 5, 2)


@pytest.mark.parametrize("frames", [
    b"o" + struct.pack(">I", 1 << 31) + b"x" * 100,       # a frame far past the bound
    b"q" + struct.pack(">I", 3) + b"abc",                  # a type no helper sends
    b"o" + struct.pack(">I", 3) + b"abc" + b"x\0\0\0\2ab",  # a short exit status
    b"o" + struct.pack(">I", 3) + b"abc",                  # no exit status at all
], ids=["huge", "unknown", "short-exit", "no-exit"])
def test_what_no_helper_would_send_ends_the_call_like_a_lost_connection(tmp_path, frames):
    call = resident.open_call(_fake_helper(tmp_path, HELLO + frames), b"print(1)", (), 5, 2)
    call.stdin.close()
    got = _read_all(call.stdout)
    assert call.wait() == -1 and len(got) <= 3


def _read_all(stream):
    out = b""
    while True:
        chunk = stream.read1(65536)
        if not chunk:
            return out
        out += chunk


@pytest.mark.parametrize("exit_watch", ["pidfd", "polled"])
def test_a_session_reports_output_and_status_whether_or_not_it_can_wait_on_a_pidfd(monkeypatch, exit_watch):
    # A worker's pipes end a moment before its exit can be collected; a session either wakes on
    # the worker's pidfd or looks again shortly, and either way reports the same.
    if exit_watch == "polled":
        monkeypatch.setattr(helper, "_exit_watch", lambda pid: None)
    ours, theirs = socket.socketpair()
    served = threading.Thread(target=helper.session, args=(theirs,), daemon=True)
    served.start()
    assert ours.recv(len(HELLO)) == HELLO
    src = b"import sys\nsys.stdout.write('out' * 1000)\nsys.stderr.write('err')\nsys.exit(3)\n"
    ours.sendall(json.dumps({"args": [], "src": len(src), "timeout": 30}).encode() + b"\n" + src)
    call = resident._Call(ours)
    call.stdin.close()
    out = _read_all(call.stdout)
    assert call.wait() == 3 and out == b"out" * 1000 and call.stderr.read1() == b"err"
    served.join(10)


@pytest.mark.parametrize("entry,request_,key", [
    ("manifest", lambda tmp: {"root": str(tmp)}, "exists"),
    # the classifier and the bottom tables shipped with it (the Xid table ...) are compiled once too
    ("logclass", lambda tmp: {"logs": [{"log": str(ROOT / "tests" / "fixtures" / "triage" / "oom_host.log")}]},
     "answers"),
])
def test_a_bundle_compiles_each_module_from_the_helpers_cache(entry, request_, key, tmp_path, monkeypatch, capsys):
    """The helper compiles every module once (from the text the arming call sends); a bundle's
    loader, run as a worker runs it, is then handed those code objects: no module compiled twice,
    and none the entry does not use."""
    monkeypatch.setattr(helper, "_CODE", {})
    helper._compile_all({onbox.module_file(name): text for name, text in onbox.sources().items()})
    asked = []

    def spy(source, filename, mode, *rest, **kw):
        code = helper.cached_compile(source, filename, mode, *rest, **kw)
        asked.append((filename, any(code is c for c in helper._CODE.values())))
        return code

    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(request_(tmp_path)).encode())))
    monkeypatch.setattr(sys, "argv", ["-c"])
    with pytest.raises(SystemExit) as ended:
        exec(compile(onbox.script(entry), "<gpuops-onbox>", "exec"), {"__name__": "__main__", "compile": spy})
    assert ended.value.code in (0, None), capsys.readouterr()
    assert json.loads(capsys.readouterr().out)[key]
    compiled = [name for name, _ in asked]  # a bundled module is compiled once it is used, not before
    assert all(cached for _, cached in asked) and len(compiled) == len(set(compiled))
    assert onbox.module_file(entry) in compiled
    assert set(compiled) <= {onbox.module_file(name) for name in onbox.closure(entry)}


def test_one_arm_at_a_time_and_a_dead_ones_marker_does_not_block_the_next(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(subprocess, "Popen", lambda argv, **kw: started.append(argv))
    master = str(tmp_path / "m")
    marker = master + mux.ARMING_SUFFIX
    resident.arm_later("box", None, master, 60)
    assert len(started) == 1 and os.path.exists(marker)
    assert started[0][1:4] == ["-m", "gpuops.remote.arming", "box"]
    resident.arm_later("box", None, master, 60)
    assert len(started) == 1, "an arm under way is not started twice"
    old = time.time() - resident.ARM_STALE_S - 1
    os.utime(marker, (old, old))
    resident.arm_later("box", "~/.ssh/other", master, 60)
    assert len(started) == 2 and started[1][-1] == "~/.ssh/other"


def test_a_fleet_arms_a_few_boxes_at_a_time(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(subprocess, "Popen", lambda argv, **kw: started.append(argv))
    for i in range(resident.MAX_ARMING + 5):
        resident.arm_later(f"box{i}", None, str(tmp_path / f"m{i}"), 60)
    assert len(started) == resident.MAX_ARMING, "the rest are armed by later calls"


def test_an_arming_process_rides_the_master_and_never_becomes_one(rig, reuse, box_runtime):
    from gpuops.remote.openssh import OpenSSHTarget

    box = _box(rig, "res-rides", box_runtime)
    arming = OpenSSHTarget(hostspec.resolve(box.spec), rides_only=True)
    assert "ControlMaster=no" in arming.ssh_argv() and arming.kept_socket == _master(box.spec)
    before = box.exec_requests()
    assert arming.run("true").exit == 0  # no master yet: a plain connection, which leaves none behind
    arming.close()
    assert box.exec_requests() - before == 1 and not os.path.exists(_master(box.spec))
