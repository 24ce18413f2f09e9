"""The push/pull/verify bar a person sees: binary units like every summary, files counted, a spinner
for byteless phases; on a terminal only."""

import io
import os
import time

import pytest
from rich.console import Console

from gpuops.render.syncbar import Bar
from tests import terminal
from tests.conftest import gpuops


def _terminal():
    out = io.StringIO()
    return out, Console(file=out, force_terminal=True, width=120, color_system=None)


def test_the_bar_speaks_mib_like_the_summary_does():
    """The bar said `314.1 MB` while the summary said `299.5 MiB` for the same bytes."""
    out, con = _terminal()
    bar = Bar(console=con)
    bar.start(314_100_000, "push (rsync)")
    bar.update(157_050_000)
    time.sleep(0.3)
    bar._progress.refresh()
    bar.close()
    text = out.getvalue()
    assert "149.8/299.5 MiB" in text and "MB" not in text.replace("MiB", "")


def test_a_byteless_phase_shows_a_spinner_with_its_elapsed_time():
    """push's "verifying on the box" was a static line for as long as verification took."""
    out, con = _terminal()
    bar = Bar(console=con)
    bar.stage("verifying on the box")
    time.sleep(1.3)
    bar.close()
    text = out.getvalue()
    assert "verifying on the box (1 s)" in text


def test_the_bar_counts_files_too_and_never_moves_back():
    """The push bar showed bytes only; rsync --info=progress2 counts files as well."""
    out, con = _terminal()
    bar = Bar(console=con)
    bar.start(10 << 20, "push (rsync)", files=229)
    bar.update(5 << 20, 12)
    bar.update(4 << 20)  # a retried attempt starting over: neither count goes back
    time.sleep(0.3)
    bar._progress.refresh()
    bar.close()
    text = out.getvalue()
    assert "5.0/10.0 MiB" in text and "12/229 files" in text


def test_verify_rehash_shows_its_hashing_on_a_terminal_and_nothing_in_a_pipe(tmp_path):
    """`verify --rehash` of 2 GiB was 2.6 s of nothing."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(3):
        (tree / f"f{i}").write_bytes(os.urandom(4 << 20))
    argv = ("verify", "--host", "local", "--local", str(tree), "--remote", str(tree), "--rehash")
    code, raw = terminal.run(*argv, env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")})
    lines = terminal.frames(raw)
    assert code == 0 and lines[-1] == "local: verified: 3 files, 12.0 MiB identical on the box", lines
    assert any(line.startswith("verifying ") and "/12.0 MiB" in line and "/3 files" in line for line in lines), lines
    piped = gpuops(*argv)
    assert piped.returncode == 0 and piped.stderr == "" and piped.stdout.count("\n") == 1


HIDE, SHOW = "\x1b[?25l", "\x1b[?25h"


def _left_as_found(raw):
    """The cursor is shown after the last time it was hidden, and the last line is ended."""
    return raw.rfind(SHOW) > raw.rfind(HIDE) and raw.endswith("\n")


def _push_pull_case(tmp_path, verb, case):
    src = tmp_path / "src"
    src.mkdir()
    for i in range(8):
        (src / f"f{i}").write_bytes(os.urandom(64 << 10))
    dst = tmp_path / "dst"
    if case == "ctrl-c":  # something that takes seconds to hash (sparse: no disk), so Ctrl-C lands mid-way
        with open(src / "big.bin", "wb") as f:
            f.truncate(2 << 30)
    if case == "error":  # the box's side fails once the walk has started: no source there
        if verb == "pull":
            src = tmp_path / "not-there"
        else:
            dst = src / "f0" / "under-a-file"
    args = [verb, "--host", "local", "--src", str(src), "--dst", str(dst)]
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "GPUOPS_STATE_DIR": str(tmp_path / "state")}
    return args, env


@pytest.mark.parametrize("verb", ["push", "pull"])
@pytest.mark.parametrize("case", ["success", "error", "ctrl-c"])
def test_push_and_pull_leave_the_terminal_as_they_found_it(tmp_path, verb, case, real_processes):
    """push and pull left the cursor hidden (4 of 4 runs), and the verdict was printed on the
    spinner's line: `⠸ verifying on the box (0 s)healthy: push verified …`."""
    args, env = _push_pull_case(tmp_path, verb, case)
    stop = (lambda out: b"walking" in out) if case == "ctrl-c" else None
    code, raw = terminal.run(*args, env=env, interrupt_after=stop)
    assert code == {"success": 0, "error": 4 if verb == "pull" else 3, "ctrl-c": 130}[case], raw
    assert HIDE in raw, "the bar or a phase's spinner was shown (else this test proves nothing)"
    assert _left_as_found(raw), repr(raw[-300:])
    lines = terminal.frames(raw)
    verdict = [line for line in lines if line.startswith("local: ") or line.startswith("gpuops: ")]
    assert verdict, lines
    for line in lines:  # a spinner's line and a verdict never share one
        assert not (("verifying" in line or "walking" in line) and ("local:" in line or "gpuops:" in line)), line
