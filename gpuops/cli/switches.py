"""Which box `gpuops <verb> ...` will connect to, read from argv before Invoke or any verb is
imported, so the SSH warm-up (gpuops.remote.warmup) can start first.

It must read argv exactly as Invoke will: a flag that takes a value takes the next word whatever
it looks like (`--name --host=evil` names the job "--host=evil"), and only the boolean flags below
take none. Anything it cannot read the same way (core flags, a stray word, a second verb, a value
that may be a flag) means no warm-up: warming is only a head start, never worth a wrong host.
tests/test_warmup.py keeps SWITCHES equal to the tasks' boolean parameters.
"""

from .. import verbindex

# The verbs that connect to their --host (teardown-check's --host only names the box in the pull
# index, disconnect's the connection to end), each with its boolean flags: from the verbs'
# descriptions (gpuops/verbindex.py, generated).
SWITCHES = verbindex.SWITCHES

# The short flags people reach for first (`logs -f`, `status -j ID`), each with the verbs whose long
# flag it stands for; anywhere else a short flag stays Invoke's to refuse.
SHORT_FLAGS = {"-f": "--follow", "-j": "--job"}
SHORT = {short: (long, verbindex.SHORT_VERBS.get(short, frozenset())) for short, long in SHORT_FLAGS.items()}


def expand_short(argv, valued=None):
    """argv (the words after the program name) with each short flag of SHORT written long when
    the verb (the first word that is not a flag) has it. valued: {verb: its flags that take a
    value}, so that a value is left as it is (`--name -f` names a job "-f"); nothing after `--`,
    which Invoke leaves unparsed."""
    out, verb, value_next = [], None, False
    for i, word in enumerate(argv):
        if word == "--":
            return out + argv[i:]
        if value_next:
            out.append(word)
            value_next = False
            continue
        if verb is None and not word.startswith("-"):
            verb = word
        long, verbs = SHORT.get(word, (None, ()))
        word = long if verb in verbs else word
        value_next = word in (valued or {}).get(verb, ())
        out.append(word)
    return out


def _maybe_a_flag(word: str):
    """Invoke takes a word that is one of the verb's flags as that flag, not as a value."""
    return word.startswith("--") and word[2:].replace("-", "").isalnum()


def connect_flags(argv):
    """(--host, --identity) of argv (the words after the program name); (None, None) unless argv
    is one connecting verb followed by its flags only, each of these two at most once."""
    argv = expand_short(argv)
    if "--" in argv:  # Invoke leaves everything after it unparsed
        argv = argv[:argv.index("--")]
    if not argv or argv[0] not in SWITCHES:
        return None, None
    switches, found = SWITCHES[argv[0]], {}
    words = iter(argv[1:])
    for word in words:
        name, eq, value = word.partition("=")
        if name in switches and not eq:
            continue
        if name in switches or not word.startswith("--") or name in ("--help", "--version"):
            return None, None
        if not eq:
            value = next(words, None)
            if value is None or _maybe_a_flag(value):
                return None, None
        if name in ("--host", "--identity"):
            if name in found:  # Invoke refuses a second value for a flag that is not a list
                return None, None
            found[name] = value
    return found.get("--host"), found.get("--identity")
