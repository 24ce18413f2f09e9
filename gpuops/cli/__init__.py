"""The `gpuops` program. Its verbs and their task namespace (shared with `inv` through the root
tasks.py) live in gpuops.cli.program; this entry point stays light on purpose: it starts the SSH
handshake for --host before importing any of them, so the two overlap (see remote.warmup)."""

import sys


def main():
    from ..remote import warmup

    flags = warmup.flag_values(sys.argv[1:], "--host", "--identity")
    warmup.start(flags.get("--host"), flags.get("--identity"))
    from .program import program

    try:
        program.run()
    except BrokenPipeError:
        sys.stderr.close()  # reader went away (e.g. `| head`): not an error worth a traceback
        sys.exit(0)
