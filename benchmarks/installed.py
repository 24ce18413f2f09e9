"""The environment a benchmark runs gpuops in: as an installed copy runs, with its modules'
bytecode compiled once and cached (pip compiles it at install), whatever the calling shell says
(a sandbox may set PYTHONDONTWRITEBYTECODE, which recompiles every module on every call and
would charge that to gpuops's start-up). The cache goes to a directory of the benchmark's own."""

import os


def as_installed(env, cache_dir):
    out = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out["PYTHONPYCACHEPREFIX"] = str(cache_dir)
    return out
