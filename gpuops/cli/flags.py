"""Task decorator with the project's flag rules: flags only, no automatic short flags; and the one
parser of numeric flag values.

Numeric task parameters default to strings (or None) on purpose: Invoke converts a flag's text
by the type of its default before gpuops sees it, so an int default turns `--timeout abc` into a
traceback. `number()` parses the text instead and turns a bad value into a usage error.
"""

from invoke import task as _task

from ..errors import UsageError

DAY = 86400

# Lookup verbs whose bare words are their query (`gpuops gotcha cuda oom`). Invoke's own
# positional arguments would swallow `--help` as a value, so the program rewrites argv instead.
WORD_ARGS = dict([("gotcha", "--query")])


def verb(help=None, iterable=None):
    return _task(auto_shortflags=False, positional=[], help=help or {}, iterable=iterable or [])


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


def _parse(text, kind):
    try:
        return kind(text)
    except ValueError:
        return None


def seconds(flag, value, low=0, high=DAY, whole=False):
    """A duration flag; `whole` where the box takes only whole seconds."""
    return number(flag, value, low, high, integer=whole, what="whole seconds" if whole else "seconds")


def words_to_flag(argv):
    """['gotcha', 'cuda', 'oom', '--json'] -> ['gotcha', '--query', 'cuda oom', '--json']."""
    for i, token in enumerate(argv):
        if token in WORD_ARGS:
            j = i + 1
            while j < len(argv) and not argv[j].startswith("-"):
                j += 1
            if j > i + 1:
                return argv[:i + 1] + [WORD_ARGS[token], " ".join(argv[i + 1:j])] + argv[j:]
            return argv
    return argv
