"""The remote command line: POSIX sh, remote-side timeout, and a script shipped through stdin.

Invoke's own timeout only stops waiting; the remote process keeps running and keeps the GPU.
So the deadline is enforced on the box by coreutils `timeout -k`, which kills the whole command
when it overruns. Everything is wrapped in `sh -c '<quoted>'` so the user's login shell (bash,
zsh, fish) never reinterprets it.

The interpreter: `python3` on the box is often not a binary but a shim (pyenv's is a bash script
that costs 50-100 ms a call). The bootstrap's first act is to name the interpreter that runs it
(PYTHON_MARK on stderr, split off again by `took_python`), so a caller can remember that path
and run it directly next time (gpuops.remote.base). It comes from the box, so it is only ever
used after `valid_python` accepted it, and always quoted; a remembered path that is no longer an
executable on the box falls through to `python3` on PATH within the same command.
"""

import re
import shlex

from ..onbox.helper.wire import KILL_AFTER_S

NO_PYTHON_MARK = "gpuops:no-python3"
PYTHON_MARK = b"gpuops:python="
MAX_PYTHON_PATH = 1024

# Names its interpreter (before anything else can fail), then reads exactly N bytes of source from
# stdin and runs them; the rest of stdin stays readable by the script (secrets travel that way,
# never in argv).
_BOOTSTRAP = (
    "import sys,os;sys.stderr.buffer.write(b'gpuops:python='+os.fsencode(sys.executable)+b'\\n');"
    "sys.stderr.flush();n=int(sys.argv.pop(1));src=sys.stdin.buffer.read(n);"
    "exec(compile(src,'<gpuops-onbox>','exec'),{'__name__':'__main__'})"
)
_MARK_LINE = re.compile(rb"^" + re.escape(PYTHON_MARK) + rb"([^\n]*)\n", re.M)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


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


def python_line(script_len: int, args=(), site=True, python=None) -> str:
    """The sh line that runs a shipped onbox script of `script_len` bytes with `args`; `site`
    False skips site-packages (and every .pth file in them), for scripts that need none.
    `python`, an interpreter an earlier call named (see took_python), is run directly while the
    box still has it as an executable; otherwise, and when it is not a valid path, `python3` on
    PATH as the login shell resolves it."""
    argv = ([] if site else ["-S"]) + ["-c", _BOOTSTRAP, str(script_len)] + [str(a) for a in args]
    line = "set -- " + join(argv) + "; "
    if python is not None and valid_python(python):
        line += 'if [ -x {p} ]; then exec {p} "$@"; fi; '.format(p=quote(python))
    check = "command -v python3 >/dev/null 2>&1 || {{ echo {} >&2; exit 127; }}; ".format(NO_PYTHON_MARK)
    return line + check + 'exec python3 "$@"'


def valid_python(path) -> bool:
    """Whether `path`, as the box named its interpreter, may go into a command line: an absolute
    path of printable characters, no `.` or `..` component, of a sane length."""
    if not isinstance(path, str) or not path.startswith("/") or len(path.encode("utf-8", "replace")) > MAX_PYTHON_PATH:
        return False
    if _CONTROL.search(path) or path.endswith("/"):
        return False
    return not any(part in (".", "..") for part in path.split("/")[1:])


def took_python(stderr: bytes):
    """(the interpreter the bootstrap named, if any and valid; stderr without that line)."""
    m = _MARK_LINE.search(stderr)
    if not m:
        return None, stderr
    rest = stderr[:m.start()] + stderr[m.end():]
    try:
        path = m.group(1).decode("utf-8")
    except UnicodeDecodeError:
        return None, rest
    return (path if valid_python(path) else None), rest


def sh(line: str) -> str:
    """Wrap a POSIX sh line so any login shell hands it to sh untouched."""
    return "sh -c " + quote(line)
