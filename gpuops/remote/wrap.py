"""The remote command line: POSIX sh, remote-side timeout, and a script shipped through stdin.

Invoke's own timeout only stops waiting; the remote process keeps running and keeps the GPU.
So the deadline is enforced on the box by coreutils `timeout -k`, which kills the whole command
when it overruns. Everything is wrapped in `sh -c '<quoted>'` so the user's login shell (bash,
zsh, fish) never reinterprets it.
"""

import shlex

NO_PYTHON_MARK = "gpuops:no-python3"
KILL_AFTER_S = 5

# Reads exactly N bytes of source from stdin and runs them; the rest of stdin stays readable
# by the script (secrets travel that way, never in argv).
_BOOTSTRAP = (
    "import sys;n=int(sys.argv.pop(1));src=sys.stdin.buffer.read(n);"
    "exec(compile(src,'<gpuops-onbox>','exec'),{'__name__':'__main__'})"
)


def quote(arg) -> str:
    return shlex.quote(str(arg))


def join(argv) -> str:
    return " ".join(quote(a) for a in argv)


def with_timeout(argv, timeout_s) -> str:
    """`argv` as a sh line that runs under `timeout -k` when the box has it."""
    cmd = join(argv)
    if not timeout_s:
        return "exec " + cmd
    t = "timeout -k {} {}".format(KILL_AFTER_S, int(max(1, round(timeout_s))))
    return "if command -v timeout >/dev/null 2>&1; then exec {} {}; else exec {}; fi".format(t, cmd, cmd)


def python_line(script_len: int, args=(), site=True) -> str:
    """The sh line that runs a shipped onbox script of `script_len` bytes with `args`; `site`
    False skips site-packages (and every .pth file in them), for scripts that need none."""
    check = "command -v python3 >/dev/null 2>&1 || {{ echo {} >&2; exit 127; }}; ".format(NO_PYTHON_MARK)
    python = ["python3"] if site else ["python3", "-S"]
    return check + "exec " + join(python + ["-c", _BOOTSTRAP, str(script_len)] + [str(a) for a in args])


def sh(line: str) -> str:
    """Wrap a POSIX sh line so any login shell hands it to sh untouched."""
    return "sh -c " + quote(line)
