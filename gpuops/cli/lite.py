"""The command lines whose meaning is certain, run without Invoke.

Importing Invoke costs ~100 ms (its config loader brings yaml, its runners unittest.mock): more
than `gpuops gotcha U7` or a local `triage` needs for its whole work, and a cost every call of an
agent's loop would pay. So the program first tries this reader. It takes the overview help, or
one verb followed only by that verb's own long flags (`--name value`, `--name=value`, a bare
switch, a repeatable flag as often as wanted), after the same bare-word rewrite the full program
makes, and calls the verb's function with the keyword arguments Invoke's parser would give it,
loading that verb's module alone. Anything else goes to the full program (gpuops.cli.program),
which owns every message about it: a verb's --help, --version, a core or short flag, an unknown
or repeated flag, a separate value that starts with '-' (Invoke may read it as a flag; after '='
it is the value, in both readers), a verb name after the verb, a stray word, '--'.
tests/test_lite.py holds both readers to the same reading.
"""

import importlib
import sys

from .. import verbindex
from . import flags as F

# Each verb and the module of verbs that defines it (gpuops/verbindex.py, generated from the
# modules' TASKS; MADE: gpuops.cli.made makes it from its description), so a verb loads only its
# own module; the full program builds its namespace from the modules in this order.
VERBS = {verb: module for verb, (_, _, module) in verbindex.VERBS.items()}
MADE = "made"
MODULES = {module: tuple(v for v, m in VERBS.items() if m == module) for module in dict.fromkeys(VERBS.values())}
HELP = (["--help"], ["-h"], ["help"])


def _module(name: str):
    return importlib.import_module(f"{__package__}.{name}")


def verb_name(body) -> str:
    return body.__name__.replace("_", "-")


def bodies() -> list:
    """Every verb's function, in the program's order."""
    return [body for name in MODULES for body in _tasks(name)]


def _tasks(module: str) -> tuple:
    """The functions of a module of verbs: its TASKS, or those gpuops.cli.made makes."""
    if module == MADE:
        made = _module(module).made
        return tuple(made(verb) for verb in MODULES[module])
    return _module(module).TASKS


def _body(verb):
    if VERBS[verb] == MADE:
        return _module(MADE).made(verb)
    return next(b for b in _module(VERBS[verb]).TASKS if verb_name(b) == verb)


def summaries() -> dict:
    """{verb: the first paragraph of its docstring}: the overview help's lines."""
    import inspect

    return {verb_name(b): (inspect.getdoc(b) or "").split("\n\n")[0] for b in bodies()}


def lines() -> dict:
    """{verb: its few words}: the rows of `gpuops help` (gpuops.surface's Verb.line)."""
    from .. import surface

    return {name: v.line for name, v in surface.verbs().items()}


def flag_kinds(body):
    """{--flag: (parameter, kind, default)} with kind "switch" (a bool default: no value), "list"
    (repeatable) or "value"; None when a default has another type, which Invoke would convert."""
    code = body.__code__
    names = code.co_varnames[1:code.co_argcount]  # after the context
    defaults = body.__defaults__ or ()
    if len(defaults) != len(names):
        return None
    iterable = set(body.task_options["iterable"])
    kinds = {}
    for name, default in zip(names, defaults):
        if name in iterable:
            kind = "list"
        elif isinstance(default, bool):
            kind = "switch"
        elif default is None or isinstance(default, str):
            kind = "value"
        else:
            return None
        kinds["--" + name.replace("_", "-")] = (name, kind, default)
    return kinds


def read(argv):
    """(verb function, keyword arguments) as Invoke would call it for argv (the words after the
    program name); None when argv is not one this reader can read exactly so."""
    if not argv or argv[0] not in VERBS or "--" in argv or any(w in VERBS for w in argv[1:]):
        return None
    body = _body(argv[0])
    kinds = flag_kinds(body)
    if kinds is None:
        return None
    words = F.words_to_flag(argv, {argv[0]: {f for f, (_, kind, _) in kinds.items() if kind != "switch"}})
    # Invoke passes every flag, and a repeatable one that was not used as an empty list.
    kwargs = {name: [] if kind == "list" else default for name, kind, default in kinds.values()}
    seen = set()
    tokens = iter(words[1:])
    for token in tokens:
        flag, eq, value = token.partition("=")
        if flag not in kinds:
            return None
        name, kind, _ = kinds[flag]
        if kind == "switch":
            if eq:
                return None
            value = True
        else:
            if not eq:  # `--name VALUE`: a VALUE that starts with '-' may be a flag to Invoke
                value = next(tokens, None)
                if value is None or value.startswith("-"):
                    return None
        if kind == "list":
            kwargs[name].append(value)
        elif name in seen:
            return None
        else:
            seen.add(name)
            kwargs[name] = value
    return body, kwargs


def help_argv(argv):
    """`gpuops help VERB` is `gpuops VERB --help` (gh's way); any other argv as it is."""
    if len(argv) == 2 and argv[0] == "help" and argv[1] in VERBS:
        return [argv[1], "--help"]
    return argv


def _help(argv) -> bool:
    """Bare `gpuops` (a short usage), the overview (--help, -h, `help`) and `help TOPIC`; False for
    anything else. An unknown topic is a usage error naming the close one."""
    import shutil

    from . import helptext

    width = min(shutil.get_terminal_size((80, 24)).columns, 100)
    if not argv:
        print(helptext.usage(width))
    elif argv in HELP:
        print(helptext.index(lines(), width))
    elif argv[0] == "help" and argv[1:] == ["all"]:
        print(helptext.overview(summaries(), width))
    elif argv[0] == "help" and argv[1:] == ["exit-codes"]:
        print(helptext.exit_codes(width))
    elif argv[0] == "help":
        from .. import errors

        topic = " ".join(argv[1:])
        close = helptext.closest(topic, list(VERBS) + list(helptext.TOPICS))
        print(f"gpuops: no help on {topic!r}" + (f" (did you mean gpuops help {close}?)" if close else
                                                 "; gpuops help lists the verbs, gpuops help exit-codes the codes"),
              file=sys.stderr)
        sys.exit(errors.USAGE)
    else:
        return False
    return True


def run(argv) -> bool:
    """Carry out argv when it is one this reader takes (the verb's exit ends the process); False
    when the full program must read it."""
    if _help(argv):
        return True
    found = read(argv)
    if found is None:
        return False
    body, kwargs = found
    try:
        body(None, **kwargs)
    except KeyboardInterrupt:
        sys.exit(130)
    return True
