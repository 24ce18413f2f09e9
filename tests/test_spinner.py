"""Never a blank screen over about a second: a spinner on stderr says what is waited for (a
handshake with its deadline, a wait counting down), only on a terminal, never in a pipe."""

import contextlib
import io
import socket
import threading
import time

import pytest
from rich.console import Console

from gpuops.cli.spinner import DELAY_S, Spinner, countdown
from gpuops.ops import jobs as op
from gpuops.remote.local import LocalTarget
from tests import terminal
from tests.conftest import gpuops
from tests.jobs.helpers import kill_everything


def _spinner():
    out = io.StringIO()
    return out, Spinner(Console(file=out, force_terminal=True, width=80, color_system=None))


def test_a_wait_is_shown_after_a_moment_the_newest_on_top_and_a_quick_one_not_at_all():
    out, spin = _spinner()
    with spin.waiting("quick"):
        time.sleep(DELAY_S / 4)
    with spin.waiting("sampling"):
        time.sleep(DELAY_S + 0.3)
        with spin.waiting(countdown("connecting", 30)):
            time.sleep(0.4)
        time.sleep(0.3)
    text = terminal.frames(out.getvalue())
    assert not any("quick" in line for line in text), "a wait shorter than the delay must not flicker"
    shown = [line.split(" ", 1)[1] for line in text if " " in line]
    inner = shown.index("connecting (30s left)")
    assert "sampling" in shown[:inner] and "sampling" in shown[inner:], "the newest wait on top, then the one under it"


@pytest.fixture
def hanging_host(rig):
    """An ssh_config alias to a port that accepts connections and never says a word."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held = []

    def hold():
        # accept() fails once the fixture closes the socket: that is this thread's end, not an error.
        with contextlib.suppress(OSError):
            for _ in range(8):
                held.append(server.accept())

    threading.Thread(target=hold, daemon=True).start()
    rig.alias("hangbox", port=server.getsockname()[1], ConnectTimeout=2)
    yield "hangbox", rig.env()
    server.close()


def test_connecting_shows_its_deadline_on_a_terminal_and_nothing_in_a_pipe(hanging_host):
    """An unreachable host was 10 s of nothing, then `Connection timed out during banner exchange`."""
    host, env = hanging_host
    code, raw = terminal.run("status", "--host", host, env={**env, "GPUOPS_TRANSPORT": "openssh"})
    lines = terminal.frames(raw)
    assert code == 3, raw
    assert any(line.endswith(f"connecting to {host} (gives up in 1s)") for line in lines), lines
    assert lines[-1].startswith(f"gpuops: {host} (127.0.0.1:") and f"(try: ssh {host} " in lines[-1]
    piped = gpuops("status", "--host", host, env={**env, "GPUOPS_TRANSPORT": "openssh"})
    assert piped.returncode == 3 and piped.stderr.count("\n") == 1 and "connecting" not in piped.stderr


def test_wait_counts_down_on_a_terminal(tmp_path):
    jobs = tmp_path / "jobs"
    try:
        job = op.launch(LocalTarget(), command="sleep 30", jobs_dir=str(jobs))["data"]["job"]["job_id"]
        code, raw = terminal.run("wait", "--jobs-dir", str(jobs), "-j", job, "--timeout", "2")
    finally:
        kill_everything(jobs)
    assert code == 6, raw
    assert any(line.endswith(f"waiting for {job} to reach the end (1s left)") for line in terminal.frames(raw)), raw


def _job_with_a_log(jobs_dir):
    doc = op.launch(LocalTarget(), command="for i in $(seq 1 30); do echo step $i; done", jobs_dir=str(jobs_dir))
    job = doc["data"]["job"]["job_id"]
    deadline = time.monotonic() + 30
    while not (jobs_dir / job / "exit.json").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return job


def test_the_first_frame_paints_before_the_imports_and_gives_the_line_back_before_any_output(tmp_path):
    """The terminal was blank for 0.14-0.2 s (warm) while a connecting verb imported what it needs:
    gpuops.cli.firstpaint paints at DELAY_S from the process's start, turning until the program's
    first write, which erases it first, even raw bytes written around the text stream."""
    from gpuops.cli.firstpaint import ERASE

    jobs_dir = tmp_path / "jobs"
    try:
        job = _job_with_a_log(jobs_dir)
        code, raw = terminal.run("logs", "--host", "local", "--jobs-dir", str(jobs_dir), "--job", job, "--raw",
                                 env={**__import__("os").environ, "NO_COLOR": "1"})
    finally:
        kill_everything(jobs_dir)
    log = raw.find("step 1\r\n")
    assert code == 0 and log >= 0 and raw.count("step ") == 30, raw[-300:]
    painted = raw.rfind("logs: asking local", 0, log)
    if painted >= 0:  # a machine quicker than DELAY_S from start to answer shows no frame at all
        assert raw[painted:log].endswith(ERASE), repr(raw[painted:log + 10])
    assert "asking local" not in raw[log:]


def test_ctrl_c_once_the_first_frame_shows_is_exit_130_without_a_traceback(hanging_host):
    """The first frame shows while gpuops still imports: a Ctrl-C there was a KeyboardInterrupt's
    traceback and a death by SIGINT."""
    host, env = hanging_host
    code, raw = terminal.run("status", "--host", host, env={**env, "GPUOPS_TRANSPORT": "openssh"},
                             interrupt_after=lambda out: f"status: asking {host}".encode() in out)
    assert code == 130 and "Traceback" not in raw, raw[-500:]
