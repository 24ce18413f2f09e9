"""The task namespace behind both `inv` (via the root tasks.py) and the `gpuops` program.

Each verb's function is written in a module here, or made from its description (gpuops.cli.made);
gpuops.cli.lite lists them, and each is added to `ns` below.
Tasks take flags only (no positional arguments) and no automatic short flags, so `--host` never
steals `-h`. The program reads what the fast path (gpuops.cli.lite) left to it.
"""

import functools
import inspect
import shutil
import sys

from invoke import Collection, Program, Task
from invoke.exceptions import Exit, ParseError
from invoke.parser import Parser

from .. import __version__, errors
from ..envelope import dumps, error_envelope
from . import helptext, lite
from .flags import words_to_flag
from .switches import SHORT, expand_short

ns = Collection()
for _body in lite.bodies():
    # A copy of the help: Invoke's to_contexts() pops each flag's text out of the dict it was given.
    ns.add_task(Task(_body, **dict(_body.task_options, help=dict(_body.task_options["help"]))))


@functools.lru_cache(maxsize=1)
def _contexts():
    # Built once: Invoke's to_contexts() pops each flag's help text as it goes, so a second
    # call (the parser's) would get contexts with no help at all.
    return ns.to_contexts()


def _takes_value():
    return {c.name: {"--" + n for a in c.flags.values() if a.takes_value for n in a.names if len(n) > 1}
            for c in _contexts()}


class GpuopsProgram(Program):
    """Invoke's Program with gpuops's own help, and command-line mistakes as one line and exit 2
    (usage; an envelope too under --json), never exit 1 (check failed) or a Python repr."""

    def run(self, argv=None, exit=True) -> None:
        argv = list(sys.argv if argv is None else argv)
        valued = _takes_value()
        argv, given = _stand_ins(argv[:1] + words_to_flag(expand_short(argv[1:], valued), valued))
        try:
            self.create_config()
            self.parse_core(argv)
            self.parse_collection()
            self.parse_tasks()
            _restore([*self.core, *self.tasks], given)
            self._refuse_unhonoured_core()
            self.parse_cleanup()
            self.update_config()
        except ParseError as e:
            verb = e.context.name if getattr(e, "context", None) is not None else None
            flags = [n for a in e.context.flags.values() for n in a.names if len(n) > 1] if verb else []
            self._usage(helptext.usage_message(str(e), verb, ns.task_names, flags), argv, verb)
        except errors.UsageError as e:
            self._usage(e.message, argv, None)
        except Exit as e:  # --help and --version end the parse stage this way
            if e.message:
                print(e.message, file=sys.stderr)
            sys.exit(e.code)
        self._execute(exit)

    def _make_parser(self):
        return Parser(initial=self.initial_context, contexts=_contexts())

    def _refuse_unhonoured_core(self):
        given = [a for a in self.core[0].args.values() if a.got_value and a.name not in helptext.HONOURED_CORE]
        if given:
            flag = "--" + max(given[0].names, key=len)
            raise errors.UsageError(f"{flag} is an option of Invoke, not of gpuops: no verb runs shell commands "
                                    "through it (dry runs are every changing verb's default; --yes acts)")

    def _usage(self, message, argv, verb) -> None:
        print(f"gpuops: {message}", file=sys.stderr)
        if "--json" in argv:
            command = verb or next((a for a in argv[1:] if a in ns.task_names), "gpuops")
            sys.stdout.write(dumps(error_envelope(command, errors.UsageError(message))) + "\n")
        sys.exit(errors.USAGE)

    def print_help(self) -> None:
        print(helptext.index(lite.lines(), _width()))

    def print_task_help(self, name: str) -> None:
        ctx = self.parser.contexts[name]
        iterable = set(getattr(ns[name], "iterable", None) or ())
        shorts = {long: short for short, (long, verbs) in SHORT.items() if name in verbs}
        flags = [(a.names, a.takes_value, a.attr_name in iterable or a.name in iterable, a.help,
                  shorts.get("--" + max(a.names, key=len)))
                 for a in {id(a): a for a in ctx.flags.values()}.values()]
        print(helptext.verb_help(name, inspect.getdoc(ns[name]), flags, _width()), end="")

    def _execute(self, exit) -> None:
        try:
            self.execute()
        except Exit as e:
            if e.message:
                print(e.message, file=sys.stderr)
            if exit:
                sys.exit(e.code)
        except KeyboardInterrupt:
            sys.exit(130)


def _stand_ins(argv: list) -> tuple:
    """argv with the VALUE of each `--flag=VALUE` that starts with '-' swapped for a stand-in, and
    {stand-in: VALUE}. Invoke splits `--exclude=--delete` in two and reads the half after '=' as
    the flag --delete when the verb has one; a value given after '=' is a value whatever it looks
    like, so a list item an agent sent (gpuops.mcp.requests) never becomes a flag."""
    import secrets

    out, given = [], {}
    for i, word in enumerate(argv):
        if word == "--":  # Invoke leaves the rest unparsed
            return out + argv[i:], given
        flag, eq, value = word.partition("=")
        if flag.startswith("--") and eq and value.startswith("-"):
            stand_in = f"gpuops-value-{secrets.token_hex(8)}"
            given[stand_in] = value
            word = f"{flag}={stand_in}"
        out.append(word)
    return out, given


def _restore(contexts: list, given: dict) -> None:
    """Each stand-in Invoke parsed, as the value it stands for (in place: a list flag's value is the
    list Invoke keeps)."""
    for ctx in contexts if given else ():
        for arg in ctx.args.values():
            value = arg.value
            if isinstance(value, list):
                value[:] = [given.get(v, v) for v in value]
            elif isinstance(value, str) and value in given:
                arg.set_value(given[value], cast=False)


def _width():
    return min(shutil.get_terminal_size((80, 24)).columns, 100)


program = GpuopsProgram(namespace=ns, version=__version__, name="gpuops", binary="gpuops")
