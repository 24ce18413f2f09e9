"""Shell scripts with CRLF line endings (U26): found before a push, fixed on request.

A script checked out on Windows with autocrlf ends every line in `\\r`; bash then reads `do\\r`,
`/path\\r` and fails in confusing ways, or a launcher silently does nothing. Python does not
care, so only shell scripts are looked at: a .sh/.bash/.zsh/.ksh name, or a `#!` line naming a
shell. Fixing rewrites the local file (mode kept, atomic replace) so that what is pushed and
what is verified are the same bytes.
"""

import os
import re

SUFFIXES = (".sh", ".bash", ".zsh", ".ksh")
MAX_BYTES = 1 << 20
_SHEBANG = re.compile(rb"^#!\s*\S*?(?:/|\s)(?:env\s+)?(?:ba|z|k|da)?sh\b")


def _path(root, rel):
    return os.path.join(os.fsencode(root), rel.encode("utf-8", "surrogateescape"))


def is_shell_script(rel: str, head: bytes) -> bool:
    return rel.lower().endswith(SUFFIXES) or bool(_SHEBANG.match(head.split(b"\n", 1)[0] + b"\n"))


def _candidate(rel: str) -> bool:
    """Worth opening: a shell suffix, or no extension at all (launchers named `run`, `train`)."""
    name = rel.rsplit("/", 1)[-1]
    return name.lower().endswith(SUFFIXES) or "." not in name.lstrip(".")


def scan(root, entries) -> list:
    """[{path, crlf_lines}] for shell scripts among file `entries` with at least one CRLF."""
    found = []
    for e in entries:
        if e.kind != "f" or e.size > MAX_BYTES or e.size == 0 or not _candidate(e.rel):
            continue
        try:
            with open(_path(root, e.rel), "rb") as f:
                data = f.read(MAX_BYTES)
        except OSError:
            continue
        if b"\r\n" in data and is_shell_script(e.rel, data[:256]):
            found.append({"path": e.rel, "crlf_lines": data.count(b"\r\n")})
    return found


def fix(root, rels) -> list:
    """Rewrite each file with LF endings; returns the rels that changed."""
    changed = []
    for rel in rels:
        path = _path(root, rel)
        with open(path, "rb") as f:
            data = f.read()
        fixed = data.replace(b"\r\n", b"\n")
        if fixed == data:
            continue
        tmp = path + b".gpuops-crlf"
        with open(tmp, "wb") as f:
            f.write(fixed)
        os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        os.replace(tmp, path)
        changed.append(rel)
    return changed
