"""The `gpuops` program. Its verbs and their task namespace (shared with `inv` through the root
tasks.py) live in gpuops.cli.program; this entry point stays light on purpose: it starts the SSH
handshake for --host before importing any of them, so the two overlap (see remote.warmup), and a
command line whose meaning is certain runs without Invoke at all (see cli.lite)."""

import sys


def main() -> None:
    try:
        _main()
    except KeyboardInterrupt:  # a Ctrl-C while gpuops was still starting: its spinner may show by then
        lite = sys.modules.get(f"{__package__}.lite")  # not imported now: a second Ctrl-C would cut that
        if sys.argv[1:] and lite is not None and sys.argv[1] in getattr(lite, "VERBS", ()):
            from .common import interrupted

            interrupted(sys.argv[1], began=False)
        sys.exit(130)


def _main() -> None:
    from .switches import connect_flags

    host, identity = connect_flags(sys.argv[1:])
    if host:
        if "--json" not in sys.argv:  # a person may be watching: something on the terminal at once
            from . import firstpaint

            firstpaint.start(f"{sys.argv[1]}: asking {host}")
        from ..remote import warmup

        warmup.start(host, identity)
    from . import lite

    sys.argv[1:] = lite.help_argv(sys.argv[1:])
    try:
        if not lite.run(sys.argv[1:]):
            from .program import program

            program.run()
    except BrokenPipeError:
        sys.stderr.close()  # reader went away (e.g. `| head`): not an error worth a traceback
        sys.exit(0)
