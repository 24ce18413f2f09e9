"""Which paths a sync carries: the rule lines handed to the tree walker on either end.

Order matters (the last matching gitignore rule wins): `.git` first so the ignore file or an
--exclude can override it with `!.git`, then the source root's `.gpuopsignore`, then --exclude,
then gpuops' own files, which nothing can re-include: rsync's partial directories and the SFTP
engine's partial files (which must sit beside what they become, for an atomic rename). The pull
manifest is kept outside the tree (gpuops.pullindex), so no name of the user's is taken by it.
"""

from ..onbox.sync.ignorerules import IGNORE_FILE

PARTIAL_DIR = ".gpuops-partial"
PART_SUFFIX = ".gpuops-part"
INTERNAL = (PARTIAL_DIR + "/", "*" + PART_SUFFIX)


def request(excludes=(), include_git=False, read_ignore_file=True) -> dict:
    """The rule part of a manifest request (see gpuops.onbox.sync.manifest)."""
    return {
        "rules_before": [] if include_git else [".git"],
        "ignore_file": IGNORE_FILE if read_ignore_file else None,
        "rules_after": list(excludes or ()) + list(INTERNAL),
    }


def fixed(lines) -> dict:
    """A request that applies exactly these rule lines (the source's, for the other end)."""
    return {"rules_before": list(lines), "ignore_file": None, "rules_after": []}
