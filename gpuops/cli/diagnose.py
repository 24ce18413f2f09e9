"""`diagnose`: explain a run that stopped or vanished (reboot, OOM-kill, hangup, Xid, disk full…)."""

from ..errors import UsageError
from .common import on_hosts, run
from .flags import number, verb


@verb("diagnose")
def diagnose(c, host, identity, job, attempt, pid, since, jobs_dir, json, timeout, gang) -> None:
    """Say why a run stopped, with the evidence, what was ruled out, and what to do next."""
    from ..ops import diagnose as op
    from ..render import diagnose as render

    def produce():
        if gang:
            if host or job or pid:
                raise UsageError("--gang names the gang's boxes and jobs itself: leave out --host, --job and --pid")
            from . import gang as several

            return several.diagnose(gang, identity)
        when = _epoch(since)
        kept = None if host or pid or not job else _kept(job)
        if kept is not None:  # a run a keeper looks after: its current attempt, on the box it runs on now
            return _kept_diagnosis(kept, lambda box, j, d: on_hosts("diagnose", box, lambda t: op.diagnose(
                t, job=j, since=when, jobs_dir=d, timeout_s=timeout, attempt=attempt), identity), jobs_dir)
        return on_hosts("diagnose", host, lambda t: op.diagnose(
            t, job=job, pid=pid, since=when, jobs_dir=jobs_dir, timeout_s=timeout, attempt=attempt), identity)

    run("diagnose", json, produce, render.render_gang if gang else render.render)


def _kept(job):
    from ..keeper import view

    return view.kept(job)


def _kept_diagnosis(kept, diagnose, jobs_dir):
    """diagnose of a kept run's current attempt, with the keeper's view (attempts, boxes lost, the
    ledger) in data.kept and its one line before the box's summary."""
    from ..keeper import view

    now = kept["attempts"][-1]
    doc = diagnose(now["box"], now["job"], jobs_dir or kept["spec"].get("jobs_dir"))
    keeper = view.status(kept)
    doc.setdefault("data", {})["kept"] = keeper["data"]["kept"]
    doc["summary"] = f"{keeper['summary']}. Attempt {len(kept['attempts'])} on {now['box']}: {doc['summary']}"
    return doc


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
