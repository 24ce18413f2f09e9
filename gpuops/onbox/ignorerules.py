"""Ignore rules in gitignore syntax, for the tree a sync sends (`.gpuopsignore`, `--exclude`).

The same rules run on both ends: locally for a push, on the box for a pull. rsync's own filter
language differs from gitignore (no negation inside dir-merge, different anchoring), so gpuops
never hands rules to rsync; it computes the exact file list itself and passes that.

Semantics kept from gitignore: blank lines and `#` comments are skipped; a trailing `/` matches
directories only; a pattern with a `/` at its start or middle is anchored at the root, otherwise it
matches a name at any depth; `*` and `?` stop at `/`; `**/`, `/**/` and `/**` span directories;
`!` re-includes; the last matching rule wins; nothing below an excluded directory is re-included
(the walk prunes it). `\\#`, `\\!` and `\\ ` escape. Only the source root's ignore file is read.
"""

import re

IGNORE_FILE = ".gpuopsignore"


def _class(pattern, i):
    """(regex, next index) for a `[...]` class starting at pattern[i]; None when unterminated."""
    j = i + 1
    if j < len(pattern) and pattern[j] in "!^":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 1
    if j >= len(pattern):
        return None
    body = pattern[i + 1:j]
    negate = body[:1] in ("!", "^")
    if negate:
        body = body[1:]
    body = body.replace("\\", "\\\\")
    return "[" + ("^/" if negate else "") + body + "]", j + 1


def _glob(pattern):
    """Regex text for a gitignore glob (without anchoring), `**` included."""
    out = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i) and (i == 0 or pattern[i - 1] == "/"):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i) and i + 2 == n and (i == 0 or pattern[i - 1] == "/"):
            out.append(".*")
            i += 2
        elif c == "*":
            while i < n and pattern[i] == "*":
                i += 1
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            cls = _class(pattern, i)
            if cls is None:
                out.append(re.escape(c))
                i += 1
            else:
                out.append(cls[0])
                i = cls[1]
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def _strip_trailing_spaces(line):
    """Unescaped trailing spaces are not part of a gitignore pattern."""
    end = len(line)
    while end > 0 and line[end - 1] == " " and not (end > 1 and line[end - 2] == "\\"):
        end -= 1
    return line[:end]


def compile_rule(line):
    """(regex, negated, dir_only) for one gitignore line, or None for a blank or comment line."""
    line = _strip_trailing_spaces(line.rstrip("\r\n"))
    if not line or line.startswith("#"):
        return None
    negated = line.startswith("!")
    if negated:
        line = line[1:]
    dir_only = line.endswith("/") and not line.endswith("\\/")
    if dir_only:
        line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line
    line = line.lstrip("/")
    prefix = "^" if anchored else "^(?:.*/)?"
    return re.compile(prefix + _glob(line) + "$", re.S), negated, dir_only


class Rules(object):
    """An ordered gitignore rule set over paths relative to the source root ('a/b.txt')."""

    def __init__(self, lines=()):
        self.lines = [l for l in lines if compile_rule(l) is not None]
        self._compiled = [compile_rule(l) for l in self.lines]

    def match(self, rel, is_dir):
        """True when `rel` itself is excluded (its parents are not looked at)."""
        excluded = False
        for regex, negated, dir_only in self._compiled:
            if dir_only and not is_dir:
                continue
            if regex.match(rel):
                excluded = not negated
        return excluded

    def excluded(self, rel, is_dir):
        """True when `rel` or any directory above it is excluded (what a walk would skip)."""
        parts = rel.split("/")
        for i in range(1, len(parts)):
            if self.match("/".join(parts[:i]), True):
                return True
        return self.match(rel, is_dir)


def read_lines(path):
    """The lines of an ignore file, or [] when there is none."""
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "surrogateescape").splitlines()
    except (IOError, OSError):
        return []
