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
