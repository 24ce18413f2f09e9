"""The task namespace behind both `inv` (via the root tasks.py) and the `gpuops` program.

Each verb lives in its own module here and is added to `ns` below. Tasks take flags only (no
positional arguments) and no automatic short flags, so `--host` never steals `-h`.
"""

import sys

from invoke import Collection, Program
from invoke.exceptions import Exit, ParseError

from .. import __version__, errors
from . import diagnose, jobs, preflight, profiles, reap, sync, triage
from .flags import words_to_flag

ns = Collection()
for _module in (preflight, reap, jobs, profiles, diagnose, triage, sync):
    for _task in _module.TASKS:
        ns.add_task(_task)


class GpuopsProgram(Program):
    """Invoke's Program, except that a command-line mistake exits 2 (usage), not 1 (check failed)."""

    def run(self, argv=None, exit=True):
        argv = list(sys.argv if argv is None else argv)
        argv = argv[:1] + words_to_flag(argv[1:])
        try:
            self.create_config()
            self.parse_core(argv)
            self.parse_collection()
            self.parse_tasks()
            self.parse_cleanup()
            self.update_config()
        except ParseError as e:
            print(f"gpuops: {e}", file=sys.stderr)
            sys.exit(errors.USAGE)
        except Exit as e:  # --help and --version end the parse stage this way
            if e.message:
                print(e.message, file=sys.stderr)
            sys.exit(e.code)
        self._execute(exit)

    def _execute(self, exit):
        try:
            self.execute()
        except Exit as e:
            if e.message:
                print(e.message, file=sys.stderr)
            if exit:
                sys.exit(e.code)
        except KeyboardInterrupt:
            sys.exit(130)


program = GpuopsProgram(namespace=ns, version=__version__, name="gpuops", binary="gpuops")

