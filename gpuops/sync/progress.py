"""Progress for people (a rich bar on stderr: bytes, rate, ETA); nothing for machines."""

import sys


class Silent:
    def start(self, total, what=""):
        pass

    def update(self, done):
        pass

    def note(self, text):
        pass

    def stage(self, text):
        pass

    def close(self):
        pass


class Bar(Silent):
    def __init__(self):
        from rich.console import Console
        from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn,
                                   TransferSpeedColumn)

        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                                  TransferSpeedColumn(), TimeRemainingColumn(),
                                  console=Console(stderr=True), transient=True)
        self._task = None
        self._done = 0

    def start(self, total, what=""):
        self._progress.start()
        self._done = 0
        self._total = total
        self._task = self._progress.add_task(what, total=total)

    def update(self, done):
        # A retried attempt counts from zero again, and protocol bytes can run past the payload:
        # the bar never moves backwards and stops at the total.
        done = min(done, self._total)
        if self._task is not None and done > self._done:
            self._done = done
            self._progress.update(self._task, completed=done)

    def note(self, text):
        self._progress.console.print(f"[yellow]{text}[/]", markup=True, highlight=False)

    def stage(self, text):
        self._progress.console.print(f"[dim]{text}[/]", markup=True, highlight=False)

    def close(self):
        self._progress.stop()


def for_humans(as_json: bool):
    """A bar when a person is watching stderr, otherwise nothing."""
    if as_json or not sys.stderr.isatty():
        return Silent()
    return Bar()
