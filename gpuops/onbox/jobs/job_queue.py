"""On-box `queue`: a sequential run queue whose entries are ordinary jobs. Entry: main(argv).

<jobs_dir>/.queues/<name>/ holds `lines` (append-only), `runner.json` (the detached runner),
`cancel` and `done.json`. An entry's job carries the key queue:<name>:<line>, so a resumed or
extended queue never starts an entry twice. The queue's engine (engine.json, fixed when it is
made) starts each entry; one that chains entries itself (Slurm's dependencies) runs the queue
without gpuops' runner.
"""

import os
import sys
import time

from ..engines import registry
from . import job_facts, job_launch
from ..host import jobrecord, procs
from ..run import wrapper
from ..host.jobrecord import META, JobError


def _queue_dir(name: str):
    if not name or "/" in name or name.startswith("."):
        raise JobError("usage", "bad queue name %r" % (name,))
    return os.path.join(jobrecord.ensure_root(), jobrecord.QUEUES, name)


def queue_entries(text: str):
    """[(line_number, command)] for the non-blank, non-comment lines (numbers are 1-based and
    physical, so appending never renumbers an existing entry)."""
    out = []
    for n, line in enumerate(text.split("\n"), 1):
        if line.strip() and not line.lstrip().startswith("#"):
            out.append((n, line))
    return out


def _entry_key(name: str, line) -> str:
    return "queue:%s:%d" % (name, line)


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8")
    except (OSError, IOError):
        return ""


def queue(opts):
    name = opts.get("name")
    qdir = _queue_dir(name)
    if opts.get("content") is None and not os.path.isdir(qdir):
        raise JobError("not-found", "no queue %r on this box" % name)
    try:
        os.makedirs(qdir, 0o700)
    except OSError:
        pass
    lines_path = os.path.join(qdir, "lines")
    started = False
    with jobrecord.Locked(os.path.join(qdir, "lock")):
        old = _read(lines_path)
        new = opts.get("content")
        if new is not None:
            new = new if new.endswith("\n") or not new else new + "\n"
            if not new.startswith(old):
                raise JobError("refused", "queue %s already holds different lines: a running queue only takes "
                                          "appended lines (never edit a file a runner is reading); use a new "
                                          "--name for a different queue" % name)
            if len(new) > len(old):
                fd = os.open(lines_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    os.write(fd, new[len(old):].encode("utf-8"))
                finally:
                    os.close(fd)
        elif not old:
            raise JobError("not-found", "no queue %r on this box" % name)
        cancel_path = os.path.join(qdir, "cancel")
        if opts.get("cancel"):
            jobrecord.write_json(cancel_path, {"at": time.time()})
        elif new is not None and os.path.exists(cancel_path):
            os.unlink(cancel_path)  # sending the file again means: carry on
        engine = registry.named(_engine(qdir, opts))
        scheduled = engine.chain is not None
        if scheduled:
            _schedule(name, qdir, opts, new is not None, engine)
        runner = jobrecord.read_json(os.path.join(qdir, "runner.json")) or {}
        alive = bool(runner.get("pid")) and jobrecord.liveness(runner) == "alive"
        done = jobrecord.read_json(os.path.join(qdir, "done.json"))
        pending = _pending(name, _read(lines_path))
        wanted = new is not None or opts.get("resume")
        if not scheduled and not alive and not opts.get("cancel") and pending and wanted:
            if done is not None:
                os.unlink(os.path.join(qdir, "done.json"))
            _start_runner(name, qdir, dict(opts, engine=engine.NAME))
            started = True
    if scheduled:
        return _scheduled_report(name, qdir, opts, engine)
    deadline = time.time() + float(opts.get("wait") or 0)
    while time.time() < deadline and not os.path.exists(os.path.join(qdir, "done.json")):
        time.sleep(0.2)
    return dict(queue_report(name, qdir), runner_started=started, engine=engine.NAME)


def _engine(qdir, opts):
    """The engine a queue runs on: recorded when it was made, and the same for every later call."""
    path = os.path.join(qdir, "engine.json")
    recorded = (jobrecord.read_json(path) or {}).get("engine")
    asked = opts.get("engine")
    if recorded is None:
        recorded = registry.named(asked).NAME
        jobrecord.write_json(path, {"engine": recorded})
    elif asked and asked != recorded:
        raise JobError("usage", "queue %s runs on %s, not %s" % (opts.get("name"), recorded, asked))
    return recorded


def _schedule(name: str, qdir, opts, sent, engine) -> None:
    """A queue its engine runs (a dependency chain): sending the file submits the lines not
    submitted yet, cancel takes back the entries that have not started."""
    keyed = _queue_jobs(name)
    entries = queue_entries(_read(os.path.join(qdir, "lines")))
    if opts.get("cancel"):
        for line, _ in entries:
            job_id = keyed.get(_entry_key(name, line))
            meta = jobrecord.read_json(jobrecord.path(job_id, META)) if job_id else None
            if meta:
                engine.queue_cancel(job_id, meta)
    elif sent:
        spec = dict(opts, labels=dict(opts.get("labels") or {}, queue=name))
        engine.chain(spec, entries, jobrecord.by_key)


def _scheduled_report(name: str, qdir, opts, engine):
    """The entries of a chained queue, once all ended or `wait` seconds passed; done when all ended."""
    deadline = time.time() + float(opts.get("wait") or 0)
    while True:
        report = queue_report(name, qdir)
        ended = all(e["job"] and engine.phase_of(e["job"]) == "ended" for e in report["entries"])
        if ended or time.time() >= deadline:
            break
        time.sleep(engine.POLL_S)
    report.update(engine=engine.NAME, chained=True, runner_alive=False, runner_started=False)
    if ended:
        failed = [e["line"] for e in report["entries"] if not _entry_ok(e["job"])]
        report["done"] = {"total": len(report["entries"]), "failed_lines": failed,
                          "cancelled": report["cancelled"], "error": None}
    return report


def _queue_jobs(name: str):
    """{entry key: job id} for the jobs this queue launched (newest wins)."""
    out = {}
    for jid, m in reversed(jobrecord.metas()):
        if m.get("queue") == name and m.get("key"):
            out[m["key"]] = jid
    return out


def _pending(name: str, text: str):
    """Entries whose job has not ended yet (not launched, or launched and still running)."""
    out = []
    launched = _queue_jobs(name)
    for line, cmd in queue_entries(text):
        job_id = launched.get(_entry_key(name, line))
        if job_id is None or _entry_open(job_id):
            out.append((line, cmd))
    return out


def _entry_open(job_id):
    meta = jobrecord.read_json(jobrecord.path(job_id, META))
    return bool(meta) and registry.of(meta).phase(job_id, meta) in ("starting", "alive")


def queue_report(name: str, qdir):
    keyed = _queue_jobs(name)
    entries = []
    for line, cmd in queue_entries(_read(os.path.join(qdir, "lines"))):
        job_id = keyed.get(_entry_key(name, line))
        entries.append({"line": line, "command": cmd, "job": job_facts.facts(job_id) if job_id else None})
    runner = jobrecord.read_json(os.path.join(qdir, "runner.json")) or {}
    return {
        "queue": name,
        "dir": qdir,
        "entries": entries,
        "runner_alive": bool(runner.get("pid")) and jobrecord.liveness(runner) == "alive",
        "done": jobrecord.read_json(os.path.join(qdir, "done.json")),
        "cancelled": os.path.exists(os.path.join(qdir, "cancel")),
        "now": time.time(),
    }


def _start_runner(name: str, qdir, opts) -> None:
    """Fork the detached runner; it records itself in runner.json before this returns."""
    r, w = os.pipe()

    def body() -> None:
        me = procs.stat(os.getpid()) or {}
        jobrecord.write_json(os.path.join(qdir, "runner.json"),
                             {"pid": os.getpid(), "start_ticks": me.get("start_ticks"), "boot_id": procs.boot_id(),
                              "started_at": time.time()})
        os.close(w)
        _run_queue(name, qdir, opts)

    wrapper.detach(body, os.path.join(qdir, "runner.log"), keep_fd=w)
    os.close(w)
    wrapper.read_until_eof(r, 10.0)  # the runner reports nothing: its end is the sign it started
    os.close(r)


def _run_queue(name: str, qdir, opts) -> None:
    """Run entries in file order, one at a time, until none is left; then write done.json."""
    common = {k: opts.get(k) for k in ("env", "secrets", "workdir", "gpus", "progress_regex")}
    root = jobrecord.jobs_dir()
    while True:
        if os.path.exists(os.path.join(qdir, "cancel")):
            _finish_queue(name, qdir, cancelled=True)
            return
        with jobrecord.Locked(os.path.join(qdir, "lock")):
            pending = _pending(name, _read(os.path.join(qdir, "lines")))
            if not pending:
                _finish_queue(name, qdir)
                return
        line, cmd = pending[0]
        key = _entry_key(name, line)
        with jobrecord.Locked(os.path.join(root, jobrecord.LOCK)):
            job_id = jobrecord.by_key(key)
            if job_id is None:
                spec = dict(common, command=cmd, kind="cmd", name="%s:%d" % (name, line), key=key, queue=name,
                            labels={"queue": name, "queue_line": str(line)})
                try:
                    job_id = registry.named(opts.get("engine")).submit(spec, job_launch.body_of(spec))
                except JobError as e:
                    sys.stderr.write("gpuops queue %s: line %d not started: %s\n" % (name, line, e))
                    _finish_queue(name, qdir, error=str(e))
                    return
        while _entry_open(job_id):
            time.sleep(0.3)


def _finish_queue(name: str, qdir, cancelled=False, error=None) -> None:
    report = queue_report(name, qdir)
    failed = [e["line"] for e in report["entries"] if not _entry_ok(e.get("job"))]
    done = {"finished_at": time.time(), "total": len(report["entries"]), "failed_lines": failed,
            "cancelled": cancelled, "error": error}
    jobrecord.write_json(os.path.join(qdir, "done.json"), done)
    sys.stderr.write("gpuops queue %s done: %d entries, %d not completed\n" % (name, done["total"], len(failed)))


def _entry_ok(job):
    return bool(job) and (job.get("exit") or {}).get("exit_code") == 0



def main(argv):
    return jobrecord.serve({"queue": queue}, argv)
