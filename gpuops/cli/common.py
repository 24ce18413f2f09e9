"""What every verb's task shares: print the envelope an operation returns, exit with its code.

A task parses flags and calls an operation that returns an envelope (gpuops.envelope). This
module prints it (JSON for machines, gpuops.render for people) and leaves with the shared exit
code. Expected errors become one line on stderr (and an error envelope under --json); anything
else is a bug: exit 70, traceback only with GPUOPS_DEBUG=1.
"""

import contextlib
import os
import shlex
import sys

from .. import errors
from ..envelope import again, dumps, envelope, error_envelope, exit_code


def _resumable(command) -> bool:
    """Whether the verb picks up where an interrupted run stopped when run again (its description's
    Verb.resumable)."""
    from .. import surface, verbindex

    return command in verbindex.VERBS and surface.verb(command).resumable


def interrupted(command, began=True) -> None:
    """Ctrl-C: say what state things are in, in words chosen by what the verb does (or that it had
    not `began`: gpuops was still starting), and the exact command that goes on from there on a
    `next:` line of its own (folded to paste whole)."""
    import shutil

    from ..render import fold

    argv = ["gpuops", *sys.argv[1:]] if sys.argv[1:] else ["gpuops", command]
    if not began:
        said = "it had not begun, so nothing changed; the same command starts it again"
    elif _resumable(command):
        said = "what it had already copied and checked is kept; the same command goes on from there"
    elif _reads(command):
        said = "it only reads, so nothing changed anywhere; the same command asks again"
    else:
        said = "what it had already done on the box stays done (status shows what runs there)"
    width = shutil.get_terminal_size((80, 24)).columns
    lines = fold.prose(f"gpuops: {command} interrupted; {said}", width, indent="  ")
    lines += fold.command(fold.units([shlex.quote(w) for w in argv]), width, "  next: ", " " * 8)
    print("\n".join(lines), file=sys.stderr)


def _reads(command) -> bool:
    from .. import surface
    from ..surface.model import READS

    verb = surface.verbs().get(command)
    return verb is not None and verb.effect == READS


@contextlib.contextmanager
def sigterm_interrupts(active: bool):
    """While following or waiting, SIGTERM interrupts like SIGINT does, so the envelope (where the
    job stands, how to go on) is still printed when a supervisor or `timeout` ends the verb."""
    if not active:
        yield
        return
    import signal

    def interrupt(signum, frame):
        raise errors.Interrupted("SIGTERM")

    before = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def on_hosts(command, host_value, op, identity=None):
    """gpuops.ops.hosts.on_hosts, imported only by a verb that connects: the transport's modules
    are most of what a light verb would otherwise load (see gpuops.cli.lite)."""
    from ..ops import hosts

    return hosts.on_hosts(command, host_value, op, identity)


def one_host(command, host_value):
    from ..ops import hosts

    return hosts.one_host(command, host_value)


def watched(watch, ask, view, asking):
    """ask() once; with `watch`, its report redrawn in place until Ctrl-C, then the last one
    (gpuops.render.live). asking: what the spinner of the first paint says."""
    if not watch:
        return ask()
    from ..render import console, live

    return live.watch(ask, console(), view, asking)


def run(command, as_json, produce, human, waiting=True):
    """Produce the envelope, print it, exit with its code. `human(doc, console)` renders it.

    On a terminal a spinner says what is waited for (gpuops.cli.spinner): every SSH handshake,
    and with `waiting` True, that the verb waits for its answer; None: handshakes only (the
    verb prints as it goes, or shows its own waits); False: nothing (it shows its own progress)."""
    from . import spinner

    try:
        with spinner.active(as_json, quiet=waiting is False), \
                spinner.show(f"{command}: waiting for the answer") if waiting is True else contextlib.nullcontext():
            doc = produce()
    except errors.GpuopsError as e:
        doc = error_envelope(command, e)
    except KeyboardInterrupt:
        interrupted(command)
        sys.exit(130)
    except Exception as e:
        if os.environ.get("GPUOPS_DEBUG"):
            raise
        doc = envelope(command, ok=False, summary=f"internal error: {type(e).__name__}: {e}",
                       error={"kind": "internal", "message": str(e)})
    if "hosts" not in doc:
        doc = again(doc, ["gpuops", *sys.argv[1:]] if sys.argv[1:] else ["gpuops", command])
    code = exit_code(doc)
    if as_json:
        sys.stdout.write(dumps(doc) + "\n")
    else:
        from ..render import LazyConsole, report

        report(doc, human, LazyConsole())
    sys.exit(code)
