"""`push`, `pull` and `verify`: checked, resumable sync whose exit status is the verification.

Exit codes: 0 verified; 1 transferred but not verified (mismatches, files that failed, the
destination filled up mid-way); 2 bad flags; 3 the box could not be reached (retries spent);
4 the source does not exist; 5 refused before sending: the payload does not fit the destination's
free bytes or inodes (pass --no-budget to try anyway).
"""

from functools import partial

from ..errors import UsageError
from .common import on_hosts, run
from .flags import verb
from .helptext import missing
from typing import Sequence

def _options(progress, exclude, include_git, rehash, delete=False, yes=False, fix_crlf=False, engine="auto",
             no_budget=False, io_timeout=30, retry_for=300, profile=None, plan=None, compress=False,
             streams="auto"):
    """Options from parsed flags (their bounds are the description's: rsync's --timeout takes whole
    seconds, and 0 would switch its stall detection off)."""
    from ..ops.sync import Options

    if plan is not None and not delete:
        raise UsageError("--plan names a plan of deletions: it goes with --delete")
    if streams != "auto" and engine == "sftp":
        raise UsageError("--streams needs the rsync engine: SFTP carries one stream")
    return Options(excludes=tuple(exclude or ()), include_git=include_git, delete=delete, yes=yes,
                   fix_crlf=fix_crlf, engine=engine, check_budget=not no_budget, io_timeout=io_timeout,
                   retry_for=retry_for, profile=profile, rehash=rehash, progress=progress, plan=plan,
                   compress=compress, streams=None if streams == "auto" else int(streams))


def _hosts(host: str, verb_name: str, single=False, **required: bool):
    """The hosts named, once every flag the verb cannot go without is given (required: {flag:
    (value, what it takes)})."""
    from ..remote.hostspec import split_hosts

    required = dict(host=(host, "an ssh_config alias or user@host:port"), **required)
    for flag, (value, what) in required.items():
        if not value:
            raise UsageError(missing(verb_name, "--" + flag, what))
    hosts = split_hosts(host)
    if single and len(hosts) != 1:
        raise UsageError(f"{verb_name} takes one host at a time (several would write into the same --dst)")
    return hosts


def _progress(as_json, hosts: Sequence[str]):
    from ..render.syncbar import for_humans
    from ..sync.progress import Silent

    return (for_humans(as_json) if len(hosts) == 1 else None) or Silent()


@verb("push")
def push(c, host, src, dst, exclude, include_git, delete, yes, fix_crlf, engine, no_budget, io_timeout, retry_for,
         streams, profile, rehash, identity, plan, compress, json, verbose) -> None:
    """Send a local directory to the box, resuming after drops, and prove it arrived (sha256 both ends)."""
    from ..ops import push as op
    from ..render import sync as render

    def produce():
        hosts = _hosts(host, "push", src=(src, "the local directory to send"),
                       dst=(dst, "the directory on the box"))
        with _progress(json, hosts) as progress:
            opts = _options(progress, exclude, include_git, rehash, delete, yes, fix_crlf, engine, no_budget,
                            io_timeout, retry_for, profile, plan, compress, streams)
            return on_hosts("push", host, lambda t: op.push(t, src, dst, opts), identity)

    run("push", json, produce, partial(render.render, verbose=verbose), waiting=False)  # its bar says what it waits for


@verb("pull")
def pull(c, host, src, dst, exclude, include_git, delete, yes, engine, no_budget, io_timeout, retry_for, streams,
         rehash, identity, plan, compress, json, verbose) -> None:
    """Fetch a directory from the box, verify it, and record the verified pull for teardown-check."""
    from ..ops import pull as op
    from ..render import sync as render

    def produce():
        hosts = _hosts(host, "pull", single=True, src=(src, "the directory on the box"),
                       dst=(dst, "the local directory"))
        with _progress(json, hosts) as progress:
            opts = _options(progress, exclude, include_git, rehash, delete, yes, engine=engine,
                            no_budget=no_budget, io_timeout=io_timeout, retry_for=retry_for, plan=plan,
                            compress=compress, streams=streams)
            return on_hosts("pull", host, lambda t: op.pull(t, src, dst, opts), identity)

    run("pull", json, produce, partial(render.render, verbose=verbose), waiting=False)


@verb("verify")
def verify(c, host, src, dst, exclude, include_git, rehash, identity, json, all, verbose, local, remote) -> None:
    """Compare a local directory with one on the box by sha256, copying nothing (deploy drift)."""
    from ..ops import verify as op
    from ..render import sync as render

    def produce():
        here, there = _renamed("--src", src, "--local", local), _renamed("--dst", dst, "--remote", remote)
        hosts = _hosts(host, "verify", src=(here, "the local directory, the reference"),
                       dst=(there, "the directory on the box"))
        with _progress(json, hosts) as progress:
            opts = _options(progress, exclude, include_git, rehash)
            return on_hosts("verify", host, lambda t: op.verify(t, here, there, opts), identity)

    run("verify", json, produce, partial(render.render, show_all=all, verbose=verbose), waiting=False)


def _renamed(flag, value, old_flag, old_value):
    """A flag's value, given under its name or its old one (both only when they agree)."""
    if value is not None and old_value is not None and value != old_value:
        raise UsageError(f"{old_flag} is the old name of {flag}: give one of them")
    return value if value is not None else old_value


TASKS = (push, pull, verify)
