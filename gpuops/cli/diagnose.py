"""`diagnose`: explain a run that stopped or vanished (reboot, OOM-kill, hangup, Xid, disk full…)."""

from ..errors import UsageError
from .common import on_hosts, run
from .flags import number, seconds, verb

PID_MAX = 1 << 22  # the kernel's PID_MAX_LIMIT


@verb(help={
    "host": "'local' (default), an ssh_config alias or user@host:port",
    "identity": "SSH private key file to use",
    "job": "a gpuops job id, --key or --name",
    "pid": "a process gpuops did not launch (lower confidence: no launch records)",
    "since": "with --pid: when it started (epoch seconds or ISO time); evidence before this is ignored",
    "jobs_dir": "job records directory on the box (default: $GPUOPS_JOBS_DIR there, else ~/.gpuops/jobs)",
    "json": "print one JSON envelope instead of tables",
    "timeout": "seconds the on-box evidence gathering may run",
    "gang": "a gang id (launch --torchrun prints it): names the node that failed first, and why",
})
def diagnose(c, host=None, identity=None, job=None, pid=None, since=None, jobs_dir=None, json=False,
             timeout="60", gang=None):
    """Say why a run stopped, with the evidence, what was ruled out, and what to do next."""
    from ..ops import diagnose as op
    from ..render import diagnose as render

    def produce():
        if gang:
            if host or job or pid:
                raise UsageError("--gang names the gang's boxes and jobs itself: leave out --host, --job and --pid")
            from . import gang as several

            return several.diagnose(gang, identity)
        when, timeout_s = _epoch(since), seconds("--timeout", timeout, low=1, whole=True)
        pid_n = number("--pid", pid, 1, PID_MAX, integer=True, what="a process id")
        return on_hosts("diagnose", host, lambda t: op.diagnose(
            t, job=job, pid=pid_n, since=when, jobs_dir=jobs_dir, timeout_s=timeout_s), identity)

    run("diagnose", json, produce, render.render_gang if gang else render.render)


def _epoch(value):
    from datetime import datetime

    if value is None:
        return None
    try:
        float(value)
    except ValueError:
        try:
            return datetime.fromisoformat(value).timestamp()
        except ValueError:
            raise UsageError(f"--since must be epoch seconds or an ISO time, got {value!r}") from None
    return number("--since", value, 0, 2 ** 32, what="epoch seconds")


TASKS = (diagnose,)
