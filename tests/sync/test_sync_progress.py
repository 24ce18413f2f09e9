"""The push/pull bar a person sees: binary units like every summary, a spinner for byteless phases."""

import io
import time

from rich.console import Console

from gpuops.sync.progress import Bar


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
