"""How a job's immutable command is run, on every engine that runs it on a host itself: bash for
a command line or a script without #!, else the script's own interpreter (checked before any job
starts), after the platform's hook, line-buffered where stdbuf is there; and in which directory."""

import os
import shutil

from ..host.jobrecord import JobError


def check_shebang(body):
    """Fail early, with the reason, when a script's #! interpreter is not on the box."""
    words = body.split(b"\n", 1)[0][2:].decode("utf-8", "replace").split()
    if not words:
        raise JobError("usage", "the script's #! line names no interpreter")
    prog = words[1] if os.path.basename(words[0]) == "env" and len(words) > 1 else words[0]
    found = shutil.which(prog) if "/" not in prog else (prog if os.access(prog, os.X_OK) else None)
    if not found:
        raise JobError("usage", "the script's interpreter %s is not available on the box" % prog)


def interpreter_argv(cmd_path, body, args, pre=None):
    """The argv that runs the command file `cmd_path` (bytes `body`), and whether stdbuf line-buffers it."""
    if body.startswith(b"#!"):
        argv = [cmd_path]
    else:
        argv = [shutil.which("bash") or "/bin/sh", cmd_path]
    argv += list(args or [])
    if pre:
        # The platform's hook (a proxy, `module load`) is sourced in the shell that then execs the
        # job, so what it exports reaches the job; its failure or output must not end the job.
        hook = "{ %s\n} >/dev/null 2>&1 || true\nexec \"$@\"" % pre
        argv = [shutil.which("bash") or "/bin/sh", "-c", hook, "gpuops-pre"] + argv
    stdbuf = shutil.which("stdbuf")  # line-buffers C stdio (Python is covered by PYTHONUNBUFFERED)
    return ([stdbuf, "-oL"] + argv) if stdbuf else argv, bool(stdbuf)


def workdir(raw, where="the box"):
    """The absolute directory a job runs in (default: the home directory); a missing one is the
    caller's mistake, said with where it was looked for."""
    path = os.path.abspath(os.path.expanduser(raw) if raw else os.path.expanduser("~"))
    if not os.path.isdir(path):
        raise JobError("usage", "workdir %s does not exist on %s" % (path, where))
    return path
