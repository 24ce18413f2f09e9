"""The environment a benchmark runs gpuops in: as an installed copy runs.

Its modules' bytecode is compiled once and cached (pip compiles it at install), whatever the
calling shell says (a sandbox may set PYTHONDONTWRITEBYTECODE, which recompiles every module on
every call and would charge that to gpuops's start-up). The cache goes to a directory of the
benchmark's own.

`installed_python` goes one step further, for the benchmarks that time whole calls: an
interpreter of a fresh venv whose site-packages names this checkout and the current
interpreter's site-packages as plain path entries, the way a wheel install puts gpuops on the
path. Its start-up then runs none of the .pth hooks of the development environment: here an
editable install's import finder and a sandbox's certifi patch cost ~45 ms a call, which no
installed gpuops pays.
"""

import os
import site
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def as_installed(env, cache_dir):
    out = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out["PYTHONPYCACHEPREFIX"] = str(cache_dir)
    return out


def installed_python(work) -> str:
    """The interpreter of a venv under `work` that finds gpuops and its dependencies on plain
    path entries (see the module docstring)."""
    venv = Path(work) / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    packages = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              check=True, capture_output=True, text=True).stdout.strip()
    entries = [str(ROOT)] + [p for p in site.getsitepackages() if os.path.isdir(p)]
    Path(packages, "gpuops-bench.pth").write_text("\n".join(entries) + "\n")
    return str(python)
