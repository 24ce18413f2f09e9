"""The signatures compiled: passes for whole chunks, one alternation for single lines, grep -E.

Python's `re` skips quickly through text only when every top-level branch of an alternation
starts with a literal character (it then builds a first-character set and tries a position only
when its byte is in the set). A flat `(?P<a>...)|(?P<b>...)` starts each branch with a group and
loses that: on 50 MB it was ~50x slower than grouping the branches by their first character,
`N(?:(?P<a>CCL error)|(?P<b>ODE_EXIT host=))|T(?:...)`, which is what `trie` builds (used to
re-read candidate lines; whole chunks go through `per_first_char`, faster still). Within a
group the branch with the longer literal head comes first, so `Killed process 12` is not taken
by the bare `Killed` branch (alternation takes the first branch that matches, not the longest).

grep -E is the fast path for big files (see scan.py); `to_ere` translates the restricted syntax
the signatures use. The translation may match more than the Python pattern (it drops nothing
that narrows a match except what grep cannot say), never less: every line grep reports is
checked again with `LINE_RX`.
"""

import re

from .signatures import HARMLESS, SIGNATURES

_META = set(".[](){}*+?|^$\\")


def _first_atom(pattern: str):
    if pattern[0] == "\\":
        if pattern[1] in "dswDSWbB":
            raise ValueError(f"signature must start with a literal character: {pattern!r}")
        return pattern[:2], pattern[2:]
    if pattern[0] in _META:
        raise ValueError(f"signature must start with a literal character: {pattern!r}")
    return pattern[0], pattern[1:]


def literal_head(pattern: str):
    """How many characters the pattern matches literally before any regex operator."""
    n, i = 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern) and pattern[i + 1] in _META:
            n, i = n + 1, i + 2
            continue
        if c in _META:
            break
        if i + 1 < len(pattern) and pattern[i + 1] in "*?{":
            break
        n, i = n + 1, i + 1
    return n


def _groups(signatures):
    """{first atom: `atom(?:(?P<id>rest)|...)`}, longer literal heads first within a group."""
    groups = {}
    for sig in signatures:
        groups.setdefault(_first_atom(sig.pattern)[0], []).append(sig)
    out = {}
    for atom, sigs in groups.items():
        sigs = sorted(sigs, key=lambda s: -literal_head(s.pattern))
        out[atom] = f"{atom}(?:" + "|".join(f"(?P<{s.id}>{_first_atom(s.pattern)[1]})" for s in sigs) + ")"
    return out


def trie(signatures):
    """One bytes regex; `m.lastgroup` is the id of the signature that matched."""
    return re.compile("|".join(_groups(signatures).values()).encode("ascii"))


def per_first_char(signatures):
    """One regex per first character. Over whole chunks these passes beat the single alternation
    about 3x: each is a literal-prefix search in C that stops only at its own character and then
    tries a handful of branches, instead of ~35 branches at every candidate position."""
    return tuple(re.compile(p.encode("ascii")) for p in _groups(signatures).values())


def _class_to_ere(body):
    """A Python bracket expression body (without [ ]) as a POSIX one: ranges kept, escapes
    turned into the characters they stand for, `]` moved first and a literal `-` last."""
    negated = body.startswith("^")
    if negated:
        body = body[1:]
    chars, i = [], 0  # (text, is_literal_char)
    while i < len(body):
        c = body[i]
        if c == "\\":
            n = body[i + 1]
            i += 2
            if n in "rn":
                continue  # grep sees one line at a time: a line break can never be inside it
            named = {"d": "0-9", "w": "[:alnum:]_", "s": "[:space:]"}
            chars.append((named.get(n) or {"t": "\t"}.get(n, n), n not in named))
        else:
            chars.append((c, True))
            i += 1
    items, j = [], 0
    while j < len(chars):
        text, literal = chars[j]
        if literal and j + 2 < len(chars) and chars[j + 1] == ("-", True) and chars[j + 2][1]:
            items.append(text + "-" + chars[j + 2][0])
            j += 3
            continue
        items.append(text)
        j += 1
    if not items:
        return "." if negated else None
    close, dash = "]" in items, "-" in items
    items = [x for x in items if x not in ("]", "-")]
    text = ("]" if close else "") + "".join(items) + ("-" if dash else "")
    if text.startswith("^"):
        text = text[1:] + "^"
    return "[" + ("^" if negated else "") + text + "]"


def to_ere(pattern: str):
    """The signature as a POSIX extended regex for grep -E (bytes semantics under LC_ALL=C)."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            n = pattern[i + 1]
            out.append({"d": "[0-9]", "s": "[[:space:]]", "S": "[^[:space:]]", "w": "[[:alnum:]_]",
                        "t": "\t"}.get(n) or ("\\" + n if n in _META else n))
            i += 2
        elif c == "[":
            j = i + 1
            while pattern[j] != "]" or pattern[j - 1] == "\\":
                j += 1
            converted = _class_to_ere(pattern[i + 1:j])
            if converted is None:
                raise ValueError(f"empty character class in {pattern!r}")
            out.append(converted)
            i = j + 1
        elif pattern.startswith("(?:", i):
            out.append("(")
            i += 3
        elif pattern.startswith("(?P<", i):
            out.append("(")
            i = pattern.index(">", i) + 1
        elif pattern.startswith("(?", i):
            raise ValueError(f"look-arounds and flags cannot be used in signatures: {pattern!r}")
        else:
            out.append(c)
            i += 1
    return "".join(out)


SIG_BY_ID = {s.id: s for s in SIGNATURES}
CANDIDATES = tuple(s for s in SIGNATURES if s.target != HARMLESS)

# Find candidate lines in whole chunks (the pure-Python engine). Harmless patterns are left out:
# they only matter on a line that some other signature already made a candidate.
CHUNK_RXS = per_first_char(CANDIDATES)
# Re-reads one candidate line with everything, harmless patterns included.
LINE_RX = trie(SIGNATURES)


def grep_patterns():
    """The candidate signatures as grep -E patterns (one per signature)."""
    return [to_ere(s.pattern) for s in CANDIDATES]
