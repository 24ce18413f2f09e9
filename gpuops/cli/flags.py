"""Task decorator with the project's flag rules: flags only, no automatic short flags."""

from invoke import task as _task


def verb(help=None, iterable=None):
    return _task(auto_shortflags=False, positional=[], help=help or {}, iterable=iterable or [])
