"""Ignore rules in gitignore syntax, for the tree a sync sends (`.gpuopsignore`, `--exclude`).

The same rules run on both ends: locally for a push, on the box for a pull. rsync's own filter
language differs from gitignore (no negation inside dir-merge, different anchoring), so gpuops
never hands rules to rsync; it computes the exact file list itself and passes that.

Semantics kept from gitignore: blank lines and `#` comments are skipped; a trailing `/` matches
directories only; a pattern with a `/` at its start or middle is anchored at the root, otherwise it
matches a name at any depth; `*` and `?` stop at `/`; `**/`, `/**/` and `/**` span directories;
`!` re-includes; the last matching rule wins; nothing below an excluded directory is re-included
(the walk prunes it). `\\#`, `\\!` and `\\ ` escape. Only the source root's ignore file is read.

Patterns come from files and flags nobody vetted, so matching never backtracks (a regex would:
`*a*a*a*a*a*a*a*a*b` against a long name takes minutes). Within a segment, the fixed-length pieces
between `*`s are each placed at their leftmost fit after the previous one, which is optimal, so no
choice is ever retried; the groups of segments between `**`s are placed over the path's names the
same way. A pattern of length P against a path of length N costs O(P * N) at worst: `Glob.work`
counts what the searches look at. (Where git's own matcher departs from these semantics, as for
`a**/b` after its literal-prefix shortcut, gpuops keeps to the semantics.)
"""
from typing import Sequence

IGNORE_FILE = ".gpuopsignore"

# Tokens other than literal characters (an escaped `*` is the literal "*", so these are not strings).
ANY = None  # `?`: any one character
STAR = object()  # a run of `*` inside a segment
GLOBSTAR = object()  # a segment that is only `**`: spans directories


class _Class(object):
    """A `[...]` bracket expression: single characters and ranges, maybe negated."""

    def __init__(self, negated, ranges) -> None:
        self.negated = negated
        self.singles = frozenset(lo for lo, hi in ranges if lo == hi)
        self.ranges = tuple((lo, hi) for lo, hi in ranges if lo != hi)

    def has(self, ch):
        if ch in self.singles:
            return not self.negated
        for lo, hi in self.ranges:
            if lo <= ch <= hi:
                return not self.negated
        return self.negated


def _class(pattern: str, i):
    """(_Class, next index) for the `[...]` at pattern[i]; None when it is never closed. A `]`
    right after the opening (or after `!`/`^`) is a member, `\\` escapes, `a-z` is a range."""
    n = len(pattern)
    j = i + 1
    negated = j < n and pattern[j] in "!^"
    if negated:
        j += 1
    ranges = []
    first = True
    while j < n and (first or pattern[j] != "]"):
        first = False
        lo, j = _class_char(pattern, j)
        if j + 1 < n and pattern[j] == "-" and pattern[j + 1] != "]":
            hi, j = _class_char(pattern, j + 1)
            ranges.append((lo, hi))
        else:
            ranges.append((lo, lo))
    if j >= n:
        return None
    return _Class(negated, ranges), j + 1


def _class_char(pattern: str, j):
    if pattern[j] == "\\" and j + 1 < len(pattern):
        return pattern[j + 1], j + 2
    return pattern[j], j + 1


def _segments(pattern: str):
    """The pattern's `/`-separated segments, each a list of tokens: a literal character, ANY, STAR
    or a _Class; a segment that is only a run of two or more `*` is GLOBSTAR instead."""
    segments, current = [], []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "/" or (c == "\\" and pattern.startswith("/", i + 1)):
            segments.append(current)
            current = []
            i += 1 if c == "/" else 2
        elif c == "*":
            run = i
            while i < n and pattern[i] == "*":
                i += 1
            whole = not current and (i == n or pattern[i] == "/" or pattern.startswith("\\/", i))
            current.append(GLOBSTAR if whole and i - run > 1 else STAR)
        elif c == "?":
            current.append(ANY)
            i += 1
        elif c == "[":
            found = _class(pattern, i)
            current.append(found[0] if found else c)
            i = found[1] if found else i + 1
        elif c == "\\" and i + 1 < n:
            current.append(pattern[i + 1])
            i += 2
        else:
            current.append(c)
            i += 1
    segments.append(current)
    return [GLOBSTAR if s == [GLOBSTAR] else _piece(s) for s in segments]


def _chunk(tokens):
    """A run of fixed-length tokens: a plain string when all are literals (matched by str methods)."""
    if all(isinstance(t, str) for t in tokens):
        return "".join(tokens)
    return tuple(tokens)


class _Pieces(object):
    """Fixed-length pieces with a wildcard between each two that spans any run: the chunks of a
    segment between its `*`s, or the groups of segments between a pattern's `**`s. The first piece
    must sit at the start, the last at the end, and each other at its leftmost fit after the one
    before: a later fit never leaves more room, so no choice is ever retried."""

    def __init__(self, pieces) -> None:
        self.head, self.middles, self.tail = pieces[0], pieces[1:-1], pieces[-1]
        self.least = sum(len(p) for p in pieces)

    def fit(self, seq, at, find) -> bool:
        """True when the pieces fit `seq`; at(piece, seq, i) tests one place, find(piece, seq, start,
        end) gives the leftmost place from start that ends by end, or -1."""
        end = len(seq) - len(self.tail)
        if len(seq) < self.least or not at(self.head, seq, 0) or not at(self.tail, seq, end):
            return False
        pos = len(self.head)
        for piece in self.middles:
            pos = find(piece, seq, pos, end)
            if pos < 0:
                return False
            pos += len(piece)
        return True


def _piece(tokens):
    """A compiled segment: a chunk when it has no `*`, else _Pieces of chunks."""
    if STAR not in tokens:
        return _chunk(tokens)
    chunks, run = [], []
    for t in tokens:
        if t is STAR:
            chunks.append(_chunk(run))
            run = []
        else:
            run.append(t)
    chunks.append(_chunk(run))
    return _Pieces(chunks)


def _any_name(name: str) -> bool:
    return True


class Glob(object):
    """One compiled gitignore pattern, matched against a path's segments (its names)."""

    def __init__(self, pattern: str, anchored) -> None:
        segments = _segments(pattern)
        groups = [[]]
        for seg in segments:
            if seg is GLOBSTAR:
                groups.append([])
            else:
                groups[-1].append(self._test(seg))
        if segments[-1] is GLOBSTAR:  # `a/**` is `a/**/*`: at least one name below `a`
            groups[-1].append(_any_name)
        self.spans = len(groups) > 1
        self.anchored = anchored or self.spans  # a lone `**` matches every path, whatever its depth
        self.plain = groups[0]
        self.groups = _Pieces(groups) if self.spans else None
        self.work = 0  # characters and names the searches looked at: the cost the module docstring bounds

    def match_names(self, names: Sequence[str]):
        """True when the path whose segments are `names` matches."""
        if not self.anchored:  # no `/` in the pattern: one segment, matched against the name
            return self.plain[0](names[-1])
        if not self.spans:
            return len(names) == len(self.plain) and self._fit(self.plain, names, 0)
        return self.groups.fit(names, self._fit, self._place)

    def _fit(self, group, names: Sequence[str], i) -> bool:
        for test in group:
            if not test(names[i]):
                return False
            i += 1
        return True

    def _place(self, group, names: Sequence[str], start, end):
        """The leftmost i >= start where `group` matches and ends by `end`, or -1."""
        for i in range(start, end - len(group) + 1):
            self.work += len(group)
            if self._fit(group, names, i):
                return i
        return -1

    def _test(self, seg):
        """name -> bool for one segment; the common shapes go straight to str methods."""
        if isinstance(seg, str):
            return seg.__eq__
        if not isinstance(seg, _Pieces):
            return lambda name: len(name) == len(seg) and self._at(seg, name, 0)
        if not seg.middles and isinstance(seg.head, str) and isinstance(seg.tail, str):
            return lambda name: len(name) >= seg.least and name.startswith(seg.head) and name.endswith(seg.tail)
        return lambda name: seg.fit(name, self._at, self._find)

    def _at(self, chunk, name: str, i):
        """`chunk` matches name[i:i + len(chunk)] (which the caller knows is in range)."""
        if isinstance(chunk, str):
            return name.startswith(chunk, i)
        for k, t in enumerate(chunk):
            ch = name[i + k]
            if not (t is ANY or (t.has(ch) if isinstance(t, _Class) else t == ch)):
                return False
        return True

    def _find(self, chunk, name: str, start, end):
        """The leftmost i >= start where `chunk` matches and ends by `end`, or -1."""
        if isinstance(chunk, str):
            found = name.find(chunk, start, end)
            self.work += (end if found < 0 else found + len(chunk)) - start
            return found
        for i in range(start, end - len(chunk) + 1):
            self.work += len(chunk)
            if self._at(chunk, name, i):
                return i
        return -1


def _strip_trailing_spaces(line):
    """Unescaped trailing spaces are not part of a gitignore pattern."""
    end = len(line)
    while end > 0 and line[end - 1] == " " and not (end > 1 and line[end - 2] == "\\"):
        end -= 1
    return line[:end]


def compile_rule(line):
    """(Glob, negated, dir_only) for one gitignore line, or None for a line that matches nothing."""
    line = _strip_trailing_spaces(line.rstrip("\r\n"))
    if not line or line.startswith("#"):
        return None
    negated = line.startswith("!")
    if negated:
        line = line[1:]
    dir_only = line.endswith("/") and not line.endswith("\\/")
    if dir_only:
        line = line[:-1]
    if not line or (len(line) - len(line.rstrip("\\"))) % 2:  # git: a lone trailing backslash never matches
        return None
    anchored = "/" in line
    return Glob(line[1:] if line.startswith("/") else line, anchored), negated, dir_only


class Rules(object):
    """An ordered gitignore rule set over paths relative to the source root ('a/b.txt')."""

    def __init__(self, lines=()) -> None:
        self.lines = [l for l in lines if compile_rule(l) is not None]
        self._compiled = [compile_rule(l) for l in self.lines]

    def match(self, rel, is_dir: bool):
        """True when `rel` itself is excluded (its parents are not looked at)."""
        return self._match(rel.split("/"), is_dir)

    def _match(self, names: Sequence[str], is_dir: bool):
        excluded = False
        for glob, negated, dir_only in self._compiled:
            if dir_only and not is_dir:
                continue
            if glob.match_names(names):
                excluded = not negated
        return excluded

    def excluded(self, rel, is_dir: bool):
        """True when `rel` or any directory above it is excluded (what a walk would skip)."""
        names = rel.split("/")
        for i in range(1, len(names)):
            if self._match(names[:i], True):
                return True
        return self._match(names, is_dir)


def read_lines(path):
    """The lines of an ignore file, or [] when there is none."""
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "surrogateescape").splitlines()
    except (IOError, OSError):
        return []
