"""`push`, `pull` and `verify`: checked, resumable sync whose exit status is the verification.

Exit codes: 0 verified; 1 transferred but not verified (mismatches, files that failed, the
destination filled up mid-way); 2 bad flags; 3 the box could not be reached (retries spent);
4 the source does not exist; 5 refused before sending: the payload does not fit the destination's
free bytes or inodes (pass --no-budget to try anyway).
"""

from functools import partial

from ..errors import UsageError
from .common import on_hosts, run
from .flags import seconds, verb
from .helptext import missing

_COMMON = {
    "host": "an ssh_config alias or user@host:port (push and verify: comma-separate several)",
    "identity": "SSH private key file to use",
    "json": "print one JSON envelope instead of a progress bar and tables",
    "exclude": "gitignore-style pattern to leave out (repeatable; added after the source's .gpuopsignore)",
    "include_git": "also send .git directories (left out by default)",
    "rehash": "read and hash every file on both ends, ignoring the digest caches (which skip files whose "
              "size, mtime, ctime, inode and device are all unchanged)",
}
_VERBOSE = "each finding in full: its evidence and fix (default: one line per finding)"
_TRANSFER = {
    "delete": "remove paths that exist only at the destination (listed only, unless --yes)",
    "yes": "with --delete: really delete",
    "plan": "with --delete --yes: delete only the paths of this plan id (from the dry run's sync.would-delete "
            "finding); when they changed, delete nothing and exit 5 with the new plan",
    "engine": "auto (rsync when both ends have it, else SFTP), rsync or sftp",
    "no_budget": "send even when the payload does not fit the destination's free bytes/inodes",
    "io_timeout": "seconds without data movement before a transfer counts as stalled and is retried",
    "retry_for": "seconds to keep retrying a failing connection before giving up",
    "compress": "compress the data on the wire (rsync --compress): pays on a slow link with data that "
                "compresses; a transfer that saw one says so (sync.slow-link)",
}


def _options(progress, exclude, include_git, rehash, delete=False, yes=False, fix_crlf=False, engine="auto",
             no_budget=False, io_timeout="30", retry_for="300", profile=None, plan=None, compress=False):
    from ..ops.sync import Options

    if plan is not None and not delete:
        raise UsageError("--plan names a plan of deletions: it goes with --delete")

    # rsync's --timeout takes whole seconds, and 0 would switch its stall detection off.
    stall_s = seconds("--io-timeout", io_timeout, low=1, whole=True)
    budget_s = seconds("--retry-for", retry_for)
    return Options(excludes=tuple(exclude or ()), include_git=include_git, delete=delete, yes=yes,
                   fix_crlf=fix_crlf, engine=engine, check_budget=not no_budget, io_timeout=stall_s,
                   retry_for=budget_s, profile=profile, rehash=rehash, progress=progress, plan=plan,
                   compress=compress)


def _hosts(host, verb_name, single=False, **required):
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


def _progress(as_json, hosts):
    from ..sync.progress import Silent, for_humans

    return for_humans(as_json) if len(hosts) == 1 else Silent()


@verb(iterable=["exclude"], help=dict(_COMMON, **_TRANSFER,
                                      src="local directory to send", dst="directory on the box (created if missing)",
                                      fix_crlf="convert shell scripts with CRLF line endings to LF before sending",
                                      profile="platform profile: warn when --dst is deleted by the platform's stop",
                                      verbose=_VERBOSE))
def push(c, host=None, src=None, dst=None, exclude=None, include_git=False, delete=False, yes=False, fix_crlf=False,
         engine="auto", no_budget=False, io_timeout="30", retry_for="300", profile=None, rehash=False, identity=None,
         plan=None, compress=False, json=False, verbose=False):
    """Send a local directory to the box, resuming after drops, and prove it arrived (sha256 both ends)."""
    from ..ops import push as op
    from ..render import sync as render

    def produce():
        hosts = _hosts(host, "push", src=(src, "the local directory to send"),
                       dst=(dst, "the directory on the box"))
        with _progress(json, hosts) as progress:
            opts = _options(progress, exclude, include_git, rehash, delete, yes, fix_crlf, engine, no_budget,
                            io_timeout, retry_for, profile, plan, compress)
            return on_hosts("push", host, lambda t: op.push(t, src, dst, opts), identity)

    run("push", json, produce, partial(render.render, verbose=verbose), waiting=False)  # its bar says what it waits for


@verb(iterable=["exclude"], help=dict(_COMMON, **_TRANSFER, src="directory on the box to fetch",
                                      dst="local directory (created if missing)", verbose=_VERBOSE))
def pull(c, host=None, src=None, dst=None, exclude=None, include_git=False, delete=False, yes=False, engine="auto",
         no_budget=False, io_timeout="30", retry_for="300", rehash=False, identity=None, plan=None, compress=False,
         json=False, verbose=False):
    """Fetch a directory from the box, verify it, and record the verified pull for teardown-check."""
    from ..ops import pull as op
    from ..render import sync as render

    def produce():
        hosts = _hosts(host, "pull", single=True, src=(src, "the directory on the box"),
                       dst=(dst, "the local directory"))
        with _progress(json, hosts) as progress:
            opts = _options(progress, exclude, include_git, rehash, delete, yes, engine=engine,
                            no_budget=no_budget, io_timeout=io_timeout, retry_for=retry_for, plan=plan,
                            compress=compress)
            return on_hosts("pull", host, lambda t: op.pull(t, src, dst, opts), identity)

    run("pull", json, produce, partial(render.render, verbose=verbose), waiting=False)


@verb(iterable=["exclude"], help=dict(_COMMON, src="local directory, the reference (as push's --src)",
                                      dst="directory on the box to compare with it (as push's --dst)",
                                      local="old name of --src, still taken", remote="old name of --dst, still taken",
                                      all="as --verbose, and list every passing check on its own line, even when "
                                          "that takes more than a screen",
                                      verbose=_VERBOSE))
def verify(c, host=None, src=None, dst=None, exclude=None, include_git=False, rehash=False, identity=None,
           json=False, all=False, verbose=False, local=None, remote=None):
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
