"""What an MCP caller may reach on the server's own machine.

A model can be steered by hostile text (a log line, a file on the box), so the server's owner,
never the caller, decides what leaves this machine:
  GPUOPS_MCP_SECRETS  names of this server's environment variables a job may receive as secrets
                      (comma or space separated); unset: none.
  GPUOPS_MCP_ROOTS    directories whose files the local-reading tools may read (os.pathsep
                      separated); unset: the server's working directory and gpuops's own state
                      and cache directories.
  GPUOPS_MCP_LOCAL    `1` lets a job run on host `local`, this server's own machine; unset: a
                      tool that would run a command here is refused (no root can bind a command).
All are read per call, like GPUOPS_MODE. Paths are judged after symlinks are resolved, so a link
inside a root that points at ~/.ssh is outside. When the box is this machine (host `local`), the
box's end of a copy and a job's working and checkpoint directories are paths here too, held to the
same roots.
"""

import os
import re

from .. import errors
from ..pullindex import state_dir
from typing import Sequence

SECRETS_ENV = "GPUOPS_MCP_SECRETS"
ROOTS_ENV = "GPUOPS_MCP_ROOTS"
LOCAL_ENV = "GPUOPS_MCP_LOCAL"


def allowed_secrets(names, environ):
    """`names`, once each is on the owner's allow-list; else Refused naming the others."""
    allowed = {n for n in re.split(r"[,\s]+", environ.get(SECRETS_ENV, "")) if n}
    refused = sorted(set(names or ()) - allowed)
    if refused:
        raise errors.Refused(
            f"secret_env {', '.join(refused)}: not on this server's allow-list; its owner lists the variables "
            f"jobs may receive in {SECRETS_ENV}")
    return names


def roots(environ, cwd):
    listed = [r for r in environ.get(ROOTS_ENV, "").split(os.pathsep) if r]
    if listed:
        return listed
    cache = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return [cwd, state_dir(), os.path.join(cache, "gpuops")]


def local_path(path, environ, cwd=None):
    """The real path of `path` when it lies under one of the roots; else Refused."""
    cwd = cwd or os.getcwd()
    real = os.path.realpath(os.path.join(cwd, path))
    for root in roots(environ, cwd):
        top = os.path.realpath(os.path.join(cwd, root))
        if os.path.commonpath([top, real]) == top:
            return real
    raise errors.Refused(f"{path}: outside the directories this server reads; its owner lists them in {ROOTS_ENV}")


def here(host: str | None) -> bool:
    """Whether `host` (one host, or None for this machine as the CLI reads it) is this machine."""
    from ..remote.hostspec import is_local

    return is_local(host or "")


def box_path(host: str | None, path: str | None, environ) -> str | None:
    """A path on the box `host`: as given on another machine; on this one, a local path under the
    roots (its real path), since there the box's end of a copy is this machine's file system."""
    return local_path(path, environ) if path and here(host) else path


def job_dir(host: str | None, workdir: str | None, environ) -> str | None:
    """A job's working directory: box_path's, and on this machine the first root when none is
    given (a job here otherwise starts in the home directory, outside every root)."""
    if workdir or not here(host):
        return box_path(host, workdir, environ)
    return local_path(roots(environ, os.getcwd())[0], environ)


def runs_here(tool: str, hosts: Sequence[str], environ) -> None:
    """Refused when `hosts` name this machine and its owner has not let jobs run here: a command
    reads and writes whatever this server's user can, so no root binds it."""
    if any(here(h) for h in hosts) and environ.get(LOCAL_ENV, "").strip().lower() not in ("1", "yes", "true"):
        raise errors.Refused(f"{tool} on host local would run a command on this server's own machine, which no root "
                             f"binds; its owner allows that with {LOCAL_ENV}=1")
