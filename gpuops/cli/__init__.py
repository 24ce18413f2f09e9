"""The `gpuops` program. Its verbs and their task namespace (shared with `inv` through the root
tasks.py) live in gpuops.cli.program; this entry point stays light on purpose: it starts the SSH
handshake for --host before importing any of them, so the two overlap (see remote.warmup)."""

import sys


def main():
    from ..remote import warmup
    from .switches import connect_flags

    warmup.start(*connect_flags(sys.argv[1:]))
    from .program import program

    try:
        program.run()
    except BrokenPipeError:
        sys.stderr.close()  # reader went away (e.g. `| head`): not an error worth a traceback
        sys.exit(0)
