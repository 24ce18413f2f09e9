"""Detached jobs: launch, status, logs, stop, retry, queue. Each returns one envelope.

Every operation is one exec channel to the box running one on-box job entry (options and
secrets travel in its stdin; see gpuops.onbox.jobrecord), except `logs --follow`, which holds a
framed stream open and reconnects from the last byte it delivered when the link drops.
"""

import json
import os
import threading
import time

from .. import contained, errors
from ..envelope import envelope
from ..boundary import answer, expect
from ..jobs import answers, frames, lastseen, state, states
from ..onbox import steps
from ..units import duration

# The on-box entry that carries out each job action.
ENTRIES = {"launch": "job_launch", "retry": "job_launch", "status": "job_facts", "excerpt": "job_facts",
           "stream": "job_stream", "stop": "job_stop", "queue": "job_queue"}
STREAM_IDLE_S = 30  # the box sends a keepalive frame every 10 s; silence this long = dead link
PAGE_BYTES = 1 << 20
KEEP_BYTES = 4 << 20


def _payload(opts):
    return json.dumps({k: v for k, v in opts.items() if v is not None}).encode("utf-8")


def _raise_reported(target, err):
    raise errors.for_kind(err.get("kind"))(f"{target.name}: {err.get('message')}")


def call(target, action, opts, timeout_s=60):
    """Run one on-box job action; its document once its shape is gpuops's, or the typed error
    it reported."""
    doc = target.run_onbox(ENTRIES[action], [action], stdin=_payload(opts), timeout_s=timeout_s)
    if doc.get("error"):
        err = expect(doc, {"error": dict}, target.name)["error"]
        _raise_reported(target, expect(err, {"kind": str, "message": str}, target.name, "error"))
    expect(doc, ANSWERS[action], target.name, f"{action} answer")
    for facts in _facts_in(action, doc):
        answers.facts(facts, target.name)
    return doc


# What each action's answer must hold, and where its job records are.
ANSWERS = {"launch": {"job": dict}, "retry": {"job": dict}, "status": {"jobs": list, "now": (int, float)},
           "excerpt": {"job": dict, "size": int, "lines": int, "pieces": list, "now": (int, float)},
           "stop": {"job_id": str, "targets": list, "after": dict}, "queue": {"entries": list}}


def _facts_in(action, doc):
    if action == "status":
        return doc["jobs"]
    if action == "stop":
        return [doc["after"]]
    if action == "queue":
        return [e["job"] for e in doc["entries"] if isinstance(e, dict) and e.get("job") is not None]
    return [doc["job"]]


def _cmd(host, verb, job, *extra, jobs_dir=None):
    from ..remote import wrap

    words = ["gpuops", verb, "--host", host, "--job", job] + list(extra)
    if jobs_dir:
        words += ["--jobs-dir", jobs_dir]
    return wrap.join(words)


# ------------------------------------------------------------------ launch / retry


def launch(target, *, command=None, script=None, name=None, labels=None, env=None, secrets=None,
           workdir=None, gpus=None, key=None, progress_regex=None, jobs_dir=None, profile=None, timeout_s=60.0):
    pre, notes = None, []
    if profile is not None:
        from ..jobs import platform

        jobs_dir, env, pre, notes = platform.settings(profile, jobs_dir=jobs_dir, env=env)
    opts = {"name": name, "labels": labels or {}, "env": env or {}, "secrets": secrets or {},
            "workdir": workdir, "gpus": gpus, "key": key, "progress_regex": progress_regex, "jobs_dir": jobs_dir,
            "profile": profile.name if profile is not None else None, "pre": pre}
    if script is not None:
        import base64

        with open(script, "rb") as f:
            opts.update(kind="script", command=os.path.basename(script),
                        script_b64=base64.b64encode(f.read()).decode("ascii"))
    else:
        opts.update(kind="cmd", command=command)
    doc = call(target, "launch", opts, timeout_s)
    out = _started("launch", target, doc, jobs_dir=jobs_dir)
    out["next"] = notes + out["next"]
    return out


def retry(target, *, job, env=None, secrets=None, resume_arg=None, key=None, jobs_dir=None, timeout_s=60.0):
    opts = {"job": job, "env": env or {}, "secrets": secrets or {}, "resume_arg": resume_arg, "key": key,
            "jobs_dir": jobs_dir}
    doc = call(target, "retry", opts, timeout_s)
    return _started("retry", target, doc, parent=doc.get("parent_job_id"), jobs_dir=jobs_dir)


def _started(verb, target, doc, parent=None, jobs_dir=None):
    facts = doc["job"]
    row = state.derive(facts)
    meta = facts.get("meta") or {}
    jid = row["job_id"]
    if doc.get("existing"):
        summary = f"job with key {meta.get('key')!r} already exists: {jid} ({row['state']}); nothing started"
    elif meta.get("spawn_error"):
        summary = f"{jid} could not start: {meta['spawn_error']}"
    else:
        summary = f"started {jid} (pid {meta.get('pid')})" + (f" as a retry of {parent}" if parent else "")
    ok = not meta.get("spawn_error")
    nxt = [_cmd(target.name, "status", jid, jobs_dir=jobs_dir),
           _cmd(target.name, "logs", jid, "--follow", jobs_dir=jobs_dir)]
    data = {"job": row, "existing": bool(doc.get("existing")), "meta": meta}
    return envelope(verb, ok=ok, summary=summary, data=data, next=nxt)


# ------------------------------------------------------------------ status


def status(target, *, job=None, labels=None, progress_regex=None, stall_factor=steps.STALL_STEPS,
           stall_min_s=steps.STALL_MIN_S, limit=50, jobs_dir=None, timeout_s=60.0):
    opts = {"job": job, "labels": labels or {}, "progress_regex": progress_regex, "limit": limit,
            "jobs_dir": jobs_dir}
    try:
        doc = call(target, "status", opts, timeout_s)
    except errors.HostError as e:
        seen = lastseen.recall(target.name, job) if job else None
        rows = [state.unreachable(job, e.message, seen)] if job else []
        message = e.message
        if seen:
            message += f" (job last seen {seen['state']} {duration(time.time() - seen['seen_at'])} ago)"
        error = dict(e.as_dict(), message=message)
        return envelope("status", ok=False, summary=f"UNREACHABLE: {message}", data={"jobs": rows}, error=error)
    rows = [state.derive(f, stall_factor, stall_min_s) for f in doc["jobs"]]
    lastseen.remember(target.name, rows)
    data = {"jobs": rows, "box_now": doc.get("now"), "jobs_dir": doc.get("jobs_dir"), "total": doc.get("total")}
    if job:
        row = rows[0]
        ok = row["state"] in states.HEALTHY
        summary = _one_line(row)
        nxt = [_cmd(target.name, "logs", row["job_id"], "--tail", "50", jobs_dir=jobs_dir)] if not ok else []
    else:
        counts = {}
        for r in rows:
            counts[r["state"]] = counts.get(r["state"], 0) + 1
        ok = True
        summary = (", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no jobs") + f" ({len(rows)} shown)"
        nxt = []
    return envelope("status", ok=ok, summary=summary, data=data, next=nxt)


def _one_line(row):
    text = f"{row['job_id']}: {row['state']}"
    if row.get("exit_code") is not None:
        text += f" (exit {row['exit_code']})"
    if row.get("signal"):
        text += f" ({row['signal']})"
    if row.get("reason"):
        text += f": {row['reason']}"
    return text


# ------------------------------------------------------------------ logs


class _Stream:
    """One framed stream call: delivers D payloads to `sink`, remembers header and end."""

    def __init__(self, sink, host):
        self.host = host
        self.reader = frames.FrameReader()
        self.sink = sink
        self.header = None
        self.end = None
        self.received = 0
        self.heard = time.monotonic()
        self.stale = False

    def on_chunk(self, chunk):
        self.heard = time.monotonic()
        for kind, payload in self.reader.feed(chunk):
            if kind == frames.HEADER:
                self.header = expect(answer(payload, self.host), {"start": int, "size": int}, self.host, "log header")
            elif kind == frames.DATA:
                self.sink(payload)
                self.received += len(payload)
            elif kind == frames.END:
                self.end = answer(payload, self.host)


def stream_once(target, opts, s):
    """One channel of the on-box `stream` action, feeding the _Stream `s` (whose header and byte
    count stay valid even when this raises; its end is None if the link dropped)."""
    from ..remote import wrap

    done = threading.Event()

    def watchdog():
        # The box sends a keepalive frame every 10 s: silence means a half-open link. Closing the
        # connection makes the blocked read return, whatever the transport.
        while not done.wait(1.0):
            if time.monotonic() - s.heard > STREAM_IDLE_S:
                s.stale = True
                target.close()
                return

    guard = threading.Thread(target=watchdog, daemon=True)
    if not target.is_local:
        guard.start()
    try:
        result = target.ship(ENTRIES["stream"], ["stream"], stdin=_payload(opts), timeout_s=None, on_stdout=s.on_chunk)
    finally:
        done.set()
        if guard.is_alive():
            guard.join()  # never close the target from two threads at once
    if s.header is None and s.end is None:
        if result.exit == 127 and wrap.NO_PYTHON_MARK in result.err_text:
            raise errors.PythonMissing(f"{target.name}: python3 is not on the remote PATH")
        if s.stale or result.exit in (-1, 255):  # -1: paramiko lost the channel; 255: ssh itself failed
            raise errors.Unreachable(f"{target.name}: the log stream's connection dropped")
        tail = (result.err_text.strip().splitlines() or [f"exit {result.exit}, no output"])[-1]
        raise errors.GpuopsError(f"{target.name}: log stream failed: {tail[:300]}")
    if s.end and s.end.get("error"):
        _raise_reported(target, s.end["error"])
    return s


def logs(target, *, job, tail=100, follow=False, from_offset=None, save=None, jobs_dir=None, sink=None,
         reconnect_s=120.0, notice=None):
    """Print (via `sink`) a bounded tail, a page from an offset, or follow until the job ends.

    Follow survives a dropped link: it reconnects (with backoff, up to `reconnect_s`) and resumes
    at the next undelivered byte. `--save DIR` mirrors the whole log to DIR/<job>/log, resuming
    a previous partial copy.
    """
    notice = notice or (lambda msg: None)
    save_file = None
    if save:
        save_file, from_offset = _open_save(target, job, save, jobs_dir)
    kept = bytearray()

    def deliver(data):
        if save_file is not None:
            save_file.write(data)
        if sink is not None:
            sink(data)
        else:
            kept.extend(data)
            if len(kept) > KEEP_BYTES:  # --json keeps the newest bytes; offsets say what was cut
                del kept[:len(kept) - KEEP_BYTES]

    opts = {"job": job, "jobs_dir": jobs_dir, "follow": bool(follow)}
    if from_offset is not None:
        opts["from_offset"] = int(from_offset)
    else:
        opts["tail"] = int(tail)
    if not follow and not save:
        opts["max_bytes"] = PAGE_BYTES
    start, offset, end, reconnects, job_id = None, None, None, 0, job
    give_up = None
    try:
        while True:
            s, err = _Stream(deliver, target.name), None
            try:
                stream_once(target, opts, s)
            except errors.BadAnswer:
                raise  # a lying box is not a dropped link: resuming would not help
            except errors.HostError as e:
                err = e
            if s.header is not None:
                job_id = answers.job_id(s.header.get("job_id", job_id), target.name)
                if start is None:
                    start = s.header["start"]
                offset = s.header["start"] + s.received
                give_up = None
            if s.end is not None:
                end = s.end
                if end.get("reason") == "rotate":
                    opts.pop("tail", None)
                    opts["from_offset"] = expect(end, {"next": int}, target.name, "log stream's end")["next"]
                    continue
                break
            # the link dropped mid-stream (or could not be opened): reconnect and resume
            if offset is None and err is not None and reconnects == 0:
                raise err
            give_up = give_up or time.monotonic() + reconnect_s
            if time.monotonic() > give_up:
                raise errors.Unreachable(
                    f"{target.name}: lost the log stream and could not reconnect within {reconnect_s:g}s; "
                    f"resume with --from-offset {offset}")
            reconnects += 1
            notice(f"gpuops: connection lost; resuming at byte {offset} (attempt {reconnects})")
            target.close()
            time.sleep(min(8.0, 0.5 * 2 ** min(reconnects - 1, 4)))
            opts.pop("tail", None)
            if offset is not None:
                opts["from_offset"] = offset
    finally:
        if save_file is not None:
            save_file.close()
    return _logs_envelope(target, job_id, start, offset, end, reconnects, save, bytes(kept), sink, jobs_dir)


def _open_save(target, job, save, jobs_dir):
    """The local mirror file (append mode) and the offset to resume from; saves meta/exit too."""
    doc = call(target, "status", {"job": job, "jobs_dir": jobs_dir})
    if not doc["jobs"]:
        raise errors.BadAnswer(f"{target.name}: the box's answer is not gpuops's: no record of job {job!r}")
    return save_records(save, doc["jobs"][0])


def save_records(save, facts):
    """Write a job's meta and exit records to SAVE/<job id>/ and open its log there for appending:
    (file, bytes it already holds). The id and the records come from the box, so every write goes
    through gpuops.contained and stays in SAVE, whatever they say and whatever links SAVE holds."""
    os.makedirs(save, exist_ok=True)
    root = contained.Root(save)
    folder = contained.one_name(facts["job_id"])
    root.makedirs(folder)
    for name, rec in (("meta.json", facts.get("meta")), ("exit.json", facts.get("exit"))):
        if rec is not None:
            root.write_atomic(f"{folder}/{name}", json.dumps(rec, indent=2, sort_keys=True).encode("utf-8"))
    with root.parent(f"{folder}/log") as (d, name):
        fd = d.open(name, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    log = os.fdopen(fd, "ab")
    return log, os.fstat(fd).st_size


def _logs_envelope(target, job_id, start, offset, end, reconnects, save, kept, sink, jobs_dir):
    end = end or {}
    data = {"job_id": job_id, "start_offset": start, "next_offset": offset if offset is not None else start,
            "bytes": (offset or 0) - (start or 0), "reconnects": reconnects, "end": end.get("reason")}
    if sink is None:
        data["text"] = kept.decode("utf-8", "replace")
        data["text_starts_at"] = data["next_offset"] - len(kept) if data["next_offset"] is not None else None
    ok, summary = True, f"{job_id}: bytes {start}..{data['next_offset']}"
    if end.get("reason") in ("exited", "vanished"):
        rec = end.get("exit")
        row = state.derive({"job_id": job_id, "meta": {}, "exit": rec, "liveness": "gone"})
        data["state"] = row["state"]
        data["exit"] = rec
        ok = row["state"] == states.COMPLETED
        summary += f"; job ended: {_one_line(row).split(': ', 1)[1]}"
    elif end.get("reason") == "eof":
        data["ended"] = bool(end.get("ended"))
    if save:
        data["saved_to"] = os.path.join(save, job_id)
        summary += f"; saved to {data['saved_to']}"
    nxt = [] if not ok or end.get("reason") in ("exited", "vanished") else [
        _cmd(target.name, "logs", job_id, "--from-offset", str(data["next_offset"]), jobs_dir=jobs_dir)
    ]
    return envelope("logs", ok=ok, summary=summary, data=data, next=nxt)


# ------------------------------------------------------------------ stop


def stop(target, *, job, grace=10.0, yes=False, jobs_dir=None):
    doc = call(target, "stop", {"job": job, "grace": float(grace), "yes": bool(yes), "jobs_dir": jobs_dir},
               timeout_s=float(grace) + 60)
    jid = doc["job_id"]
    after = state.derive(doc["after"])
    targets = doc.get("targets") or []
    data = {"job_id": jid, "targets": targets, "state": after["state"], "after": after,
            "signals": doc.get("signals") or [], "remaining": doc.get("remaining") or [],
            "gpu_holders_left": doc.get("gpu_holders_left") or []}
    if not targets:
        return envelope("stop", ok=True, summary=f"nothing to stop: {jid} is {after['state']} and none of its "
                                                  f"processes is alive", data=data)
    gpu = sum(1 for t in targets if t.get("gpu"))
    if doc.get("dry_run"):
        out = envelope("stop", ok=False, summary=f"dry run: would send SIGTERM to {len(targets)} process(es) of "
                                                 f"{jid} ({gpu} holding a GPU), SIGKILL after {float(grace):g}s; "
                                                 "add --yes", data=dict(data, dry_run=True),
                       next=[_cmd(target.name, "stop", jid, "--grace", f"{float(grace):g}", "--yes",
                                  jobs_dir=jobs_dir)])
        out["exit_code_hint"] = errors.REFUSED
        return out
    used = "+".join(s["signal"] for s in doc.get("signals") or [])
    if doc.get("all_gone"):
        summary = f"stopped {jid}: {len(targets)} process(es) gone ({used}); state {after['state']}"
        return envelope("stop", ok=True, summary=summary, data=data,
                        next=[_cmd(target.name, "retry", jid, jobs_dir=jobs_dir)])
    left = ", ".join(str(r["pid"]) for r in doc.get("remaining") or [])
    return envelope("stop", ok=False, summary=f"{jid}: processes still alive after {used}: {left}", data=data)


# ------------------------------------------------------------------ queue


def queue(target, *, name, content=None, env=None, secrets=None, workdir=None, gpus=None, wait=0.0, cancel=False,
          jobs_dir=None):
    opts = {"name": name, "content": content, "env": env or {}, "secrets": secrets or {}, "workdir": workdir,
            "gpus": gpus, "wait": float(wait), "cancel": bool(cancel), "jobs_dir": jobs_dir}
    doc = call(target, "queue", opts, timeout_s=float(wait) + 60)
    entries = []
    for e in doc["entries"]:
        row = state.derive(e["job"]) if e.get("job") else {"job_id": None, "state": states.PENDING}
        entries.append({"line": e["line"], "command": e["command"], "job_id": row.get("job_id"),
                        "state": row["state"], "exit_code": row.get("exit_code"), "signal": row.get("signal")})
    done = doc.get("done")
    finished = sum(1 for e in entries if e["state"] in states.TERMINAL)
    failed = [e["line"] for e in entries if e["state"] in states.TERMINAL and e["state"] != states.COMPLETED]
    data = {"queue": name, "entries": entries, "done": done, "runner_alive": doc.get("runner_alive"),
            "runner_started": doc.get("runner_started"), "failed_lines": failed, "dir": doc.get("dir")}
    if done:
        verb = "cancelled" if done.get("cancelled") else "done"
        summary = f"queue {name} {verb}: {finished}/{len(entries)} entries ran, {len(failed)} not completed"
        if failed:
            summary += f" (lines {', '.join(map(str, failed))})"
        ok = not failed and not done.get("error")
    else:
        running = next((e for e in entries if e["state"] in (states.RUNNING, states.STALLED, states.STARTING)), None)
        summary = f"queue {name}: {finished}/{len(entries)} finished"
        if running:
            summary += f", running line {running['line']} ({running['job_id']})"
        if not doc.get("runner_alive") and not doc.get("runner_started"):
            summary += "; no runner (re-run with --file to resume)"
        ok = not failed
    return envelope("queue", ok=ok, summary=summary, data=data)
