"""Task decorator with the project's flag rules: flags only, no automatic short flags."""

from invoke import task as _task

# Lookup verbs whose bare words are their query (`gpuops gotcha cuda oom`). Invoke's own
# positional arguments would swallow `--help` as a value, so the program rewrites argv instead.
WORD_ARGS = dict([("gotcha", "--query")])


def verb(help=None, iterable=None):
    return _task(auto_shortflags=False, positional=[], help=help or {}, iterable=iterable or [])


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
