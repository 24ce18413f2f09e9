"""Task decorator with the project's flag rules: flags, no automatic short flags.

Positional arguments are off by default (a stray word must not silently become a value);
a lookup verb may name one (`gpuops gotcha inode`), which still works as a flag too.
"""

from invoke import task as _task


def verb(help=None, iterable=None, positional=()):
    return _task(auto_shortflags=False, positional=list(positional), help=help or {},
                 iterable=iterable or [])
