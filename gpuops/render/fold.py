"""Lines a person pastes or reads at the terminal's width, folded where a shell or a reader expects.

A command gpuops suggests is folded between its words with a trailing backslash, so pasted whole it
is still one command; a flag stays on the line of its value, and no word or quoted string is ever
split (a terminal folding it itself broke `--from-offset 71|2` and `gpuop|s push`). Prose folds
between words. Both are pure: text in, lines out.
"""

import textwrap
from typing import Sequence

CONTINUED = " \\"


def units(words: Sequence[str]):
    """Shell-quoted `words` in the pieces a fold may not cut: a flag with its value, else a word."""
    out, i = [], 0
    while i < len(words):
        flag = words[i].startswith("-") and "=" not in words[i]
        take = 2 if flag and i + 1 < len(words) and not words[i + 1].startswith("-") else 1
        out.append(" ".join(words[i:i + take]))
        i += take
    return out


def command(pieces, width: int, lead="", indent="    "):
    """`pieces` (from `units`) as lines of at most `width` columns where they allow it: the first
    after `lead`, each later one after `indent`, every line but the last ending in a backslash."""
    lines, line = [], lead + pieces[0]
    for piece in pieces[1:]:
        if len(line) + 1 + len(piece) + len(CONTINUED) > width and line.strip():
            lines.append(line + CONTINUED)
            line = indent + piece
        else:
            line += " " + piece
    return lines + [line]


def advice(text: str, width: int, lead, indent):
    """An advice line: a command with its `   # why` comment keeps the command whole on the first
    line and folds the comment after it, each later line a comment of its own, so pasting what is
    shown runs the command and nothing else. Other advice is prose."""
    cmd, sep, why = text.partition("   # ")
    if not sep:
        return prose(text, width, lead, indent)
    first = lead + cmd.rstrip() + sep
    if len(first) + 20 > width:  # too little room after the command: the comment starts below it
        return [lead + cmd.rstrip()] + prose(why, width, indent + "# ", indent + "# ")
    return prose(why, width, first, indent + "# ")


def prose(text: str, width: int, lead="", indent=None):
    """`text` filled to `width` at spaces only: a flag, a path or a URL is never broken inside."""
    return textwrap.wrap(" ".join(text.split()), width=max(40, width), initial_indent=lead,
                         subsequent_indent=" " * len(lead) if indent is None else indent,
                         break_long_words=False, break_on_hyphens=False) or [lead.rstrip()]
