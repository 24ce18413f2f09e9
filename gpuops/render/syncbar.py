"""A copy's progress for people (a rich bar on stderr: bytes, files, rate, ETA, rsync
--info=progress2's way; a spinner with the elapsed time through the phases that move no bytes, such
as walking or waiting for the box); nothing for machines. Sizes are binary (MiB, GiB) here as in
every summary, so the bar and the verdict agree. A copy reports through gpuops.sync.progress.Silent's
methods; this is the one that draws them, and sync never imports it."""

import sys

from ..units import human_bytes


def _rate_column():
    from rich.progress import ProgressColumn
    from rich.text import Text

    class Rate(ProgressColumn):
        """Bytes per second in binary units (rich's own column is decimal)."""

        def render(self, task):
            speed = task.finished_speed or task.speed
            return Text(f"{human_bytes(speed)}/s" if speed is not None else "?", style="progress.data.speed")

    return Rate()


class Bar:
    """gpuops.sync.progress.Silent's methods, drawn; also a context, as Silent is."""

    def __init__(self, console=None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

        self._console = console or Console(stderr=True)
        # a short bar, so that bytes, files, rate and ETA still fit one line of 80 columns
        self._progress = Progress(TextColumn("{task.description}"), BarColumn(bar_width=24),
                                  DownloadColumn(binary_units=True), TextColumn("{task.fields[files]}"),
                                  _rate_column(), TimeRemainingColumn(), console=self._console, transient=True)
        self._task = None
        self._done = 0
        self._status = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self, total: int, what="", files=None) -> None:
        """A bar over `total` bytes, and over `files` files when given."""
        from .live import start as start_live

        self._end_stage()
        start_live(self._progress)
        self._done = self._files_done = 0
        self._total, self._files = total, files
        self._task = self._progress.add_task(what, total=total, files=self._files_text())

    def update(self, done, files=None) -> None:
        # A retried attempt counts from zero again, and protocol bytes can run past the payload:
        # the bar never moves backwards and stops at the total.
        done = min(done, self._total)
        if files is not None and self._files is not None:
            self._files_done = max(self._files_done, min(files, self._files))
        if self._task is not None and (done > self._done or files is not None):
            self._done = max(done, self._done)
            self._progress.update(self._task, completed=self._done, files=self._files_text())

    def _files_text(self):
        return f"{self._files_done}/{self._files} files" if self._files is not None else ""

    def note(self, text: str) -> None:
        from .inert import text as inert

        self._progress.console.print(inert(text), style="yellow", markup=False, highlight=False)

    def stage(self, text: str) -> None:
        """A phase that moves no bytes: a spinner with its elapsed time until the next one begins."""
        from .inert import text as inert

        self._end_stage()
        self._status = _Stage(self._console, inert(text))

    def _end_stage(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def close(self) -> None:
        self._progress.stop()
        self._end_stage()


class _Stage:
    def __init__(self, console, text: str) -> None:
        import time

        from rich.live import Live
        from rich.spinner import Spinner

        self._spinner = Spinner("dots", text=text, style="dim")
        self._started = time.monotonic()
        self._text = text
        from .live import start as start_live

        self._live = Live(self, console=console, transient=True, refresh_per_second=8)
        start_live(self._live)

    def __rich__(self):
        import time

        from rich.text import Text

        self._spinner.update(text=Text(f"{self._text} ({time.monotonic() - self._started:.0f} s)"))
        return self._spinner

    def stop(self) -> None:
        self._live.stop()


def for_humans(as_json: bool):
    """A bar when a person is watching stderr, otherwise None (the caller stays silent)."""
    if as_json or not sys.stderr.isatty():
        return None
    return Bar()
