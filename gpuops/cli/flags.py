"""Task decorator with the project's flag rules: flags only, no automatic short flags; and the one
parser of numeric flag values.

`verb` makes a verb's function from its description (gpuops.surface) and records those rules on
it: Invoke turns it into a task when the full program is built (gpuops.cli.program), so a verb
module loads without Invoke and the fast path (gpuops.cli.lite) can call the function itself.

Numeric task parameters default to strings (or None) on purpose: Invoke converts a flag's text
by the type of its default before gpuops sees it, so an int default turns `--timeout abc` into a
traceback. `number()` parses the text instead (within the bounds the description gives) and turns
a bad value into a usage error.
"""

from .. import verbindex
from ..errors import UsageError
from ..surface.model import CHOICE, INT, NUMERIC, REPEATED, SECS

DAY = 86400

# Verbs with one obvious argument take it as a bare word: `gotcha cuda oom`, `profiles autodl`,
# `logs demo`. Invoke's own positional arguments would swallow `--help` as a value, so the
# program rewrites argv instead. True: every bare word joins the query; False: exactly one word.
# From each verb's description (Verb.word, Verb.words), through gpuops/verbindex.py.
WORD_ARGS = verbindex.WORD_ARGS


def verb(name: str):
    """The task of verb `name`, made from its description (gpuops.surface): its flags and their
    order, defaults, help and which repeat. The body names the parameters it takes (the same, in
    the same order: else a TypeError at import) and gets each number parsed and held to its
    bounds, and each choice checked; a bad value is a usage error (exit 2, an envelope under
    --json) before the body runs. A verb that takes engine flags ends with `engine_flags`
    (gpuops.cli.engineflags adds them)."""

    def make(body):
        from .. import surface

        spec = surface.verb(name)
        code = body.__code__
        own = list(code.co_varnames[1:code.co_argcount])
        if own != _names(spec):
            raise TypeError(f"{body.__name__} takes {own}; the description of {name} says {_names(spec)}")
        return task(spec, body, body.__name__, body.__doc__, body.__module__, body.__qualname__)

    return make


def _names(spec) -> list:
    return [p.name for p in spec.params] + (["engine_flags"] if spec.engine_flags else [])


def task(spec, body, fn: str, doc, module: str, qualname: str = ""):
    """The function Invoke makes verb `spec`'s task of: named `fn`, taking the context and every flag
    of the description by name, with its default, and calling `body(c, **flags)` once each value is
    parsed (see verb). gpuops.cli.made gives it the body of a verb no one writes."""
    names = _names(spec)
    defaults = [p.cli_default for p in spec.params] + ([None] if spec.engine_flags else [])
    src = (f"def {fn}(c, " + ", ".join(f"{n}=_d[{i}]" for i, n in enumerate(names)) + "):\n"
           "    return _parsed(_body, _spec, c, " + ", ".join(f"{n}={n}" for n in names) + ")\n")
    space = {"_body": body, "_spec": spec, "_d": defaults, "_parsed": _parsed}
    exec(compile(src, f"<the task of {spec.name}>", "exec"), space)
    made = space[fn]
    made.__doc__, made.__module__, made.__qualname__ = doc, module, qualname or fn
    made.task_options = {"auto_shortflags": False, "positional": [], "help": {p.name: p.help for p in spec.params},
                         "iterable": [p.name for p in spec.params if p.kind in REPEATED]}
    return made


def _parsed(body, spec, c, **given):
    try:
        values = {p.name: value(p, given[p.name]) for p in spec.params}
    except UsageError as bad:
        from .common import run

        run(spec.name, bool(given.get("json")), _raiser(bad), None, waiting=False)
    return body(c, **dict(given, **values))


def _raiser(error):
    def produce():
        raise error

    return produce


def value(param, text):
    """A flag's value as its Param says it is: a number within its bounds, one of its choices, or
    the text as given; None stays None."""
    if text is None or param.kind not in NUMERIC + (CHOICE,):
        return text
    if param.kind == CHOICE:
        if text not in param.choices:
            words = ", ".join(param.choices[:-1]) + " or " + param.choices[-1]
            raise UsageError(f"{param.flag} takes {words}, not {text!r}")
        return text
    if param.kind == SECS:
        return seconds(param.flag, text, param.low, param.high, whole=param.what == "whole seconds")
    return number(param.flag, text, param.low, param.high, integer=param.kind == INT, what=param.what)


def number(flag, value, low, high, integer=False, what=None):
    """The flag's text as a number in [low, high]: an int when it is written as one (required when
    `integer`), else a float; None stays None. Anything else (nan and inf included) is a UsageError
    that names the flag and the value."""
    if value is None:
        return None
    text = str(value).strip()
    parsed = _parse(text, int)
    if parsed is None and not integer:
        parsed = _parse(text, float)
    if parsed is None or not low <= parsed <= high:  # nan fails every comparison, inf the upper bound
        what = what or ("a whole number" if integer else "a number")
        shown = repr(text if len(text) <= 40 else text[:40] + "...")
        raise UsageError(f"{flag} takes {what} from {low} to {high}, not {shown}")
    return parsed


def _parse(text: str, kind):
    try:
        return kind(text)
    except ValueError:
        return None


def seconds(flag, value, low=0, high=DAY, whole=False):
    """A duration flag: seconds (`90`) or a number with units (`15s`, `10m`, `4h`, `1h30m`;
    gpuops.units.parse_duration), in [low, high]; `whole` where the box takes only whole seconds.
    None stays None."""
    if value is None:
        return None
    from ..units import parse_duration

    text = str(value).strip()
    shown = repr(text if len(text) <= 40 else text[:40] + "...")
    try:
        parsed = parse_duration(text)
    except ValueError:
        parsed = None
    if parsed is None or not low <= parsed <= high or (whole and parsed != int(parsed)):
        what = "whole seconds" if whole else "a duration"
        raise UsageError(f"{flag} takes {what} (90, 15s, 10m, 1h30m) from {_span(low)} to {_span(high)}, not {shown}")
    return int(parsed) if parsed == int(parsed) else parsed


def _span(s) -> str:
    """A bound in its largest exact unit: 86400 -> '1d', 90 -> '90s'."""
    for unit, size in (("d", DAY), ("h", 3600), ("m", 60)):
        if s and s % size == 0:
            return f"{s // size:g}{unit}"
    return f"{s:g}s"


def check_words(resume_arg):
    """The box splits --resume-arg into words for a script job (and bash would for a command): an
    unbalanced quote is the caller's mistake, reported before anything is sent."""
    if resume_arg:
        import shlex

        try:
            shlex.split(resume_arg)
        except ValueError as e:
            raise UsageError(f"--resume-arg {resume_arg!r} cannot be split into words: {e}") from None


def words_to_flag(argv, takes_value):
    """['gotcha', '--limit', '3', 'cuda', 'oom'] -> ['gotcha', '--limit', '3', '--query', 'cuda oom'].

    takes_value: {verb: flags that take a value}, so a flag's value is never read as a word."""
    for i, token in enumerate(argv):
        if token not in WORD_ARGS:
            continue
        flag, join = WORD_ARGS[token]
        valued = takes_value.get(token, ())
        words, j = [], i + 1
        while j < len(argv) and argv[j] != "--":
            if argv[j].startswith("-"):
                if argv[j].split("=", 1)[0] == flag:
                    return argv  # given as a flag too: leave the mix for the parser to refuse
                j += 2 if "=" not in argv[j] and argv[j] in valued else 1
                continue
            words.append(j)
            j += 1
        if not words or (not join and len(words) > 1):
            return argv
        rest = [t for k, t in enumerate(argv[i + 1:], i + 1) if k not in words]
        return argv[:i + 1] + [flag, " ".join(argv[k] for k in words)] + rest
    return argv
