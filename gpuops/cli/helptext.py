"""The program's own help and its answers to command-line mistakes: pure text, no Invoke.

Invoke's help opens with 27 lines of its own options and calls a verb's text "Docstring:";
people need the verbs first, grouped by what they are for, with examples they can paste.
"""

import difflib
import re
import textwrap

from .. import verbindex
from typing import Sequence

TAGLINE = "gpuops: operate rented GPU boxes over SSH without losing runs, data or money."

# The verbs by group, in the help's order: from each verb's description (Verb.group), through
# gpuops/verbindex.py, so the help loads no description for it.
GROUPS = tuple((group, tuple(v for v, (g, _, _) in verbindex.VERBS.items() if g == group))
               for group in dict.fromkeys(g for g, _, _ in verbindex.VERBS.values()))

OVERVIEW_EXAMPLES = (
    ("gpuops preflight", "check this machine"),
    ("gpuops preflight --host box", "check a box (an ssh_config alias or user@host:port)"),
    ("gpuops push --host box --src ./data --dst /data", "copy a tree and prove it arrived"),
    ("gpuops launch --host box --name train --cmd 'python train.py'", "start a job that survives SSH drops"),
)

# Bare `gpuops`: one line each at 80 columns.
USAGE_EXAMPLES = (
    ("gpuops preflight --host box", "check a box first"),
    ("gpuops push --host box --src ./data --dst /data", "copy a tree, verified"),
    ("gpuops launch --host box --cmd 'python train.py'", "a job that outlives SSH"),
    ("gpuops status --host box", "how its jobs are doing"),
)


def examples(verb) -> tuple:
    """The whole command lines a verb's help shows (its description's Verb.examples)."""
    from .. import surface

    return surface.verb(verb).examples if verb in verbindex.VERBS else ()


# Each exit code and what it means: `gpuops help exit-codes` and the README's table (a test keeps
# the two equal and every code of gpuops.errors listed).
EXIT_CODES = (
    ("0", "nothing failed"),
    ("1", "a check failed (a fail finding, a failed job, a mismatch)"),
    ("2", "usage or configuration error"),
    ("3", "host unreachable, authentication failed, host key changed, timed out, or no python3 on the box"),
    ("4", "not found (job, file, profile, gotcha, a host name that does not resolve)"),
    ("5", "refused, or needs `--yes` (every destructive verb is a dry run without it), or a `--plan` that no "
          "longer matches"),
    ("6", "a wait ran out of time first (`wait`, `logs --follow --timeout`); the envelope says where to resume"),
    ("70", "internal error (a bug; `GPUOPS_DEBUG=1` shows the traceback)"),
    ("130, 143", "stopped by SIGINT, SIGTERM (Ctrl-C): `logs --follow` and `wait` still print where the job "
                 "stands and the command that goes on; push, pull and verify the command that resumes"),
)

TOPICS = {"exit-codes": "what each exit code means", "all": "every verb with its whole summary, and examples"}

# Invoke's core options that mean something in gpuops; the rest (--dry, --echo, --pty, -T ...)
# configure Invoke's own run(), which no verb uses, so accepting them would only pretend.
HONOURED_CORE = ("help", "version", "complete", "print-completion-script")


def _wrap(text: str, width: int, indent, subsequent=None):
    """`text` filled to `width` at spaces only: a flag (`--gpus-per-node`), a path or a URL is
    never broken inside."""
    return textwrap.fill(" ".join(text.split()), width=max(40, width), initial_indent=indent,
                         subsequent_indent=" " * len(indent) if subsequent is None else subsequent,
                         break_long_words=False, break_on_hyphens=False)


def example_lines(command, width: int, indent="  "):
    """A command line for the help, folded between its words with a trailing backslash (a shell
    reads the lines as one command, pasted whole); a word or a quoted string is never split."""
    import shlex

    from ..render import fold

    try:
        words = shlex.split(command)
    except ValueError:
        return [indent + command]
    return fold.command(fold.units([shlex.quote(w) for w in words]), width, indent, indent + "    ")


def usage(width: int = 80):
    """What bare `gpuops` prints: the verbs by group, names only, the first commands to try and
    where the rest of the help is; a screen, not the whole reference."""
    out = [TAGLINE, "", "Usage: gpuops <verb> [flags]", ""]
    name_w = max(len(g) for g, _ in GROUPS) + 2
    for group, verbs in GROUPS:
        out.append(_wrap("  ".join(verbs), width, f"  {group:<{name_w}}"))
    out += ["", "Start here"]
    cmd_w = max(len(c) for c, _ in USAGE_EXAMPLES) + 2
    for cmd, what in USAGE_EXAMPLES:
        if 2 + cmd_w + len(what) <= width:
            out.append(f"  {cmd:<{cmd_w}}{what}")
        else:
            out += example_lines(cmd, width) + [f"      {what}"]
    out += ["", "More", "  gpuops help <verb>      a verb's flags and examples (or: gpuops <verb> --help)",
            "  gpuops help exit-codes  what each exit code means",
            "  gpuops help             every verb, one line each"]
    return "\n".join(out)


def exit_codes(width: int = 80):
    """`gpuops help exit-codes`: each code, what it means."""
    out = ["Exit codes: the same for every verb (--json adds the error's kind and message)", ""]
    for code, meaning in EXIT_CODES:
        out.append(_wrap(meaning.replace("`", ""), width, f"  {code:<10}"))
    return "\n".join(out)


def index(lines, width: int = 80):
    """`gpuops help`: every verb on one row under its group, and where the rest is; a 24-row
    terminal shows it whole with the prompt under it. lines: {verb: its few words}."""
    group_w = max(len(g) for g, _ in GROUPS) + 2
    name_w = max(len(v) for v in lines) + 2
    out = [TAGLINE]
    placed = set()
    for group, verbs in GROUPS + (("Other", tuple(sorted(lines))),):
        label = group
        for v in verbs:
            if v in lines and v not in placed:
                placed.add(v)
                out.append(_cut(f"{label:<{group_w}}{v:<{name_w}}{lines[v]}", width))
                label = ""
    out.append(_cut("gpuops help VERB: its flags · gpuops help all · gpuops help exit-codes", width))
    return "\n".join(out)


def _cut(row, width: int):
    """An index row within `width`: its words, ending at a word with an ellipsis when they do not fit."""
    if len(row) <= width:
        return row
    return row[:width - 1].rsplit(" ", 1)[0] + "…"


def overview(summaries, width: int = 80):
    """`gpuops help all`: verbs grouped, each with its whole summary, then examples. summaries: {verb: line}."""
    out = [TAGLINE, "", "Usage: gpuops <verb> [flags]        gpuops <verb> --help", ""]
    placed = set()
    name_w = max(len(n) for n in summaries) + 2
    for group, verbs in GROUPS + (("Other", tuple(sorted(summaries))),):
        rows = [v for v in verbs if v in summaries and v not in placed]
        if not rows:
            continue
        out.append(group)
        for v in rows:
            placed.add(v)
            lead = f"  {v:<{name_w}}"
            out.append(_wrap(summaries[v], width, lead) if summaries[v] else lead.rstrip())
        out.append("")
    out.append("Examples")
    for cmd, what in OVERVIEW_EXAMPLES:
        out.append(f"  {cmd}")
        out.append(f"      {what}")
    out += ["", _wrap("Every verb takes --json (one JSON envelope on stdout); the exit code says what "
                      "happened (gpuops help exit-codes).", width, "")]
    return "\n".join(out)


def flag_line(names: Sequence[str], value, repeatable, short=None):
    """'--host=HOST' / '--label=VALUE ...' / '--json' / '-j, --job=JOB' for one flag."""
    long = max(names, key=len)
    shown = (f"{short}, " if short else "") + ("-" if len(long) == 1 else "--") + long
    if value:
        shown += "=" + (long.upper().replace("-", "_") if len(long) <= 12 else "VALUE")
    return shown + (" ..." if repeatable else "")


def verb_help(verb, doc, flags, width: int = 80):
    """USAGE / description / FLAGS / EXAMPLES for one verb. flags: [(names, takes_value,
    repeatable, help, short flag or None)]."""
    out = [f"Usage: gpuops {verb} [flags]", ""]
    paragraphs = [p for p in re.split(r"\n\s*\n", doc or "") if p.strip()]
    for p in paragraphs:
        out += [_wrap(p, width, ""), ""]
    if flags:
        shown = {max(names, key=len): (flag_line(names, value, rep, short), text)
                 for names, value, rep, text, short in flags}
        col = min(max(len(s) for s, _ in shown.values()) + 4, 30)
        for title, names in _flag_groups(verb, shown):
            out.append(title)
            for n in names:
                out += _flag_lines(*shown[n][:1], shown[n][1] or "", col, width)
            out.append("")
    if examples(verb):
        out.append("Examples")
        for e in examples(verb):
            out += example_lines(e, width)
        out.append("")
    return "\n".join(line.rstrip() for line in out).rstrip() + "\n"


def _flag_groups(verb, shown) -> list:
    """[(title, [flag names])]: the sections of the verb's description (Verb.sections) in order,
    each engine's own flags after --engine's, what they leave out last; else every flag, sorted."""
    from .. import surface

    spec = surface.verb(verb) if verb in verbindex.VERBS else None
    if spec is None or not spec.sections:  # alphabetical, as `--x` sorts after `-j, --job`'s long name
        return [("Flags", sorted(shown, key=lambda n: shown[n][0].split(", ")[-1]))]
    groups = []
    for title, names in spec.sections:
        groups.append((title, tuple(n.replace("_", "-") for n in names)))
        if "engine" in names and spec.engine_flags:
            groups += _engine_groups(verb)
    placed = [(title, [n for n in names if n in shown]) for title, names in groups]
    named = {n for _, names in placed for n in names}
    rest = sorted(n for n in shown if n not in named)
    return [(t, ns) for t, ns in placed + [("Other", rest)] if ns]


def _engine_groups(verb):
    """Each engine's own flags under its name."""
    from .. import engines

    out = []
    for e in engines.each():
        names = tuple(k.replace("_", "-") for k in e.flags_for(verb))
        if names:
            out.append((f"{e.title} (--engine {e.name})", names))
    return out


def _flag_lines(s, text: str, col, width: int):
    if s.endswith(" ...") and "repeatable" not in text:
        text += " (repeatable)"
    if len(s) + 4 > col:
        return [f"  {s}", _wrap(text, width, " " * col) if text else ""]
    return [_wrap(text, width, f"  {s:<{col - 2}}") if text else f"  {s}"]


def missing(verb, flag, what):
    """The usage line for a required flag left out: what it takes, and a whole command to copy."""
    shown = examples(verb)
    example = next((e for e in shown if f" {flag} " in f"{e} "), shown[0] if shown else None)
    return f"{verb} needs {flag} ({what})" + (f"; e.g. {example}" if example else "")


def closest(word: str, candidates):
    """The one candidate close enough to `word` to suggest, or None."""
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return close[0] if close else None


_UNKNOWN = re.compile(r"No idea what '(?P<word>.*)' is!")
_NEEDS_VALUE = re.compile(r"Flag <Argument: (?P<name>[\w-]+)(?: \((?P<short>\w)\))?> needed value")


def usage_message(message, verb, verbs, verb_flags):
    """Invoke's parse error as one line a person can act on. verb: the verb being parsed (None
    before one); verbs: every verb; verb_flags: that verb's long flag names."""
    see = f"see gpuops {verb} --help" if verb else "see gpuops --help"
    m = _UNKNOWN.match(message)
    if m:
        word = m.group("word")
        if word.startswith("-") and verb:
            close = closest(word.lstrip("-"), verb_flags)
            return f"unknown flag {word} for {verb}" + (f" (did you mean --{close}?)" if close else f"; {see}")
        if word.startswith("-"):
            return f"unknown flag {word}; {see}"
        if verb:
            return f"{verb} takes flags, not {word!r}; {see}"
        close = closest(word, verbs)
        return f"unknown verb {word!r}" + (f" (did you mean {close}?)" if close else f"; {see}")
    m = _NEEDS_VALUE.match(message)
    if m:
        name, short = m.group("name"), m.group("short")
        if short and name not in verb_flags:
            return f"-{short} is not a flag of {verb or 'gpuops'}; {see}"
        return f"--{name} needs a value; {see}"
    return message
