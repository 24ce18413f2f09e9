"""The program's own help and its answers to command-line mistakes: pure text, no Invoke.

Invoke's help opens with 27 lines of its own options and calls a verb's text "Docstring:";
people need the verbs first, grouped by what they are for, with examples they can paste.
"""

import difflib
import re
import textwrap

TAGLINE = "gpuops: operate rented GPU machines over SSH without losing runs, data or money."

GROUPS = (
    ("Check", ("preflight", "fleet", "profiles", "teardown-check")),
    ("Data", ("push", "pull", "verify")),
    ("Jobs", ("launch", "status", "wait", "logs", "stop", "pause", "resume", "retry", "queue")),
    ("Post-mortem", ("diagnose", "triage", "reap")),
    ("Reference", ("gotcha",)),
    ("Connections", ("disconnect",)),
)

OVERVIEW_EXAMPLES = (
    ("gpuops preflight", "check this machine"),
    ("gpuops preflight --host box", "check a box (an ssh_config alias or user@host:port)"),
    ("gpuops push --host box --src ./data --dst /data", "copy a tree and prove it arrived"),
    ("gpuops launch --host box --name train --cmd 'python train.py'", "start a job that survives SSH drops"),
)

EXAMPLES = {
    "preflight": ["gpuops preflight", "gpuops preflight --host box --json"],
    "fleet": ["gpuops fleet", "gpuops fleet --host a,b,c --json", "gpuops fleet --fleet train --watch"],
    "push": ["gpuops push --host box --src ./data --dst /root/autodl-tmp/data"],
    "pull": ["gpuops pull --host box --src /root/autodl-tmp/ckpt --dst ./ckpt"],
    "verify": ["gpuops verify --host box --src ./data --dst /root/autodl-tmp/data"],
    "launch": ["gpuops launch --host box --name train --cmd 'python train.py'",
               "gpuops launch --fleet train --gpus 4 --gpu-type H100 --cmd 'python train.py'",
               "gpuops launch --host a,b --torchrun --nproc-per-node 8 --cmd 'train.py --lr 3e-4'",
               "gpuops launch --host login --engine slurm --nodes 2 --gpus-per-node 8 --time 4:00:00 --signal USR1@120 "
               "--torchrun --cmd 'train.py --resume auto'"],
    "pause": ["gpuops pause --host login --job train --ckpt-regex 'saved checkpoint'"],
    "resume": ["gpuops resume --host login --job train",
               "gpuops resume --host box --job train --resume-arg '--resume last.pt'"],
    "status": ["gpuops status --host box", "gpuops status --host box --job train", "gpuops status --gang GANG_ID"],
    "wait": ["gpuops wait --host box --job train --timeout 3600",
             "gpuops wait --host box --job train --log-regex 'step 1000\\b' --timeout 600"],
    "logs": ["gpuops logs --host box --job train --follow", "gpuops logs -j train -f",
             "gpuops logs --gang GANG_ID --follow"],
    "stop": ["gpuops stop --host box --job train", "gpuops stop --host box --job train --yes",
             "gpuops stop --gang GANG_ID"],
    "retry": ["gpuops retry --host box --job train --resume-arg '--resume last.pt'"],
    "queue": ["gpuops queue --host box --file runs.txt", "gpuops queue --host box --name runs"],
    "diagnose": ["gpuops diagnose --host box --job train", "gpuops diagnose --gang GANG_ID"],
    "triage": ["gpuops triage --log train.log", "gpuops triage --host box --job train"],
    "reap": ["gpuops reap --host box", "gpuops reap --host box --yes"],
    "profiles": ["gpuops profiles", "gpuops profiles autodl", "gpuops profiles --guess --host box"],
    "gotcha": ["gpuops gotcha inode", "gpuops gotcha U7"],
    "teardown-check": ["gpuops teardown-check --profile autodl"],
    "disconnect": ["gpuops disconnect", "gpuops disconnect --host box"],
}

# Invoke's core options that mean something in gpuops; the rest (--dry, --echo, --pty, -T ...)
# configure Invoke's own run(), which no verb uses, so accepting them would only pretend.
HONOURED_CORE = ("help", "version", "complete", "print-completion-script")


def _wrap(text, width, indent):
    return textwrap.fill(" ".join(text.split()), width=max(40, width), initial_indent=indent,
                         subsequent_indent=" " * len(indent))


def overview(summaries, width=80):
    """The top-level help: verbs grouped, one line each, then examples. summaries: {verb: line}."""
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
                      "happened.", width, "")]
    return "\n".join(out)


def flag_line(names, value, repeatable, short=None):
    """'--host=HOST' / '--label=VALUE ...' / '--json' / '-j, --job=JOB' for one flag."""
    long = max(names, key=len)
    shown = (f"{short}, " if short else "") + ("-" if len(long) == 1 else "--") + long
    if value:
        shown += "=" + (long.upper().replace("-", "_") if len(long) <= 12 else "VALUE")
    return shown + (" ..." if repeatable else "")


def verb_help(verb, doc, flags, width=80):
    """USAGE / description / FLAGS / EXAMPLES for one verb. flags: [(names, takes_value,
    repeatable, help, short flag or None)]."""
    out = [f"Usage: gpuops {verb} [flags]", ""]
    paragraphs = [p for p in re.split(r"\n\s*\n", doc or "") if p.strip()]
    for p in paragraphs:
        out += [_wrap(p, width, ""), ""]
    if flags:
        out.append("Flags")
        shown = [(flag_line(names, value, rep, short), text) for names, value, rep, text, short in flags]
        col = min(max(len(s) for s, _ in shown) + 4, 30)
        for s, text in sorted(shown, key=lambda pair: pair[0].split(", ")[-1]):
            text = text or ""
            if s.endswith(" ...") and "repeatable" not in text:
                text += " (repeatable)"
            if len(s) + 4 > col:
                out.append(f"  {s}")
                out.append(_wrap(text, width, " " * col) if text else "")
            else:
                out.append(_wrap(text, width, f"  {s:<{col - 2}}") if text else f"  {s}")
        out.append("")
    if EXAMPLES.get(verb):
        out.append("Examples")
        out += [f"  {e}" for e in EXAMPLES[verb]]
        out.append("")
    return "\n".join(line.rstrip() for line in out).rstrip() + "\n"


def missing(verb, flag, what):
    """The usage line for a required flag left out: what it takes, and a whole command to copy."""
    examples = EXAMPLES.get(verb) or []
    example = next((e for e in examples if f" {flag} " in f"{e} "), examples[0] if examples else None)
    return f"{verb} needs {flag} ({what})" + (f"; e.g. {example}" if example else "")


def closest(word, candidates):
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
