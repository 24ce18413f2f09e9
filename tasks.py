"""`inv <verb>` entry point: the same namespace as the `gpuops` program."""

from gpuops.cli.program import ns  # noqa: F401  (Invoke looks for `ns`)
