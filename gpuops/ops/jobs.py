"""Detached jobs: launch, status, stop, retry, queue, and the one call every job action makes.
Each returns one envelope; `logs` is gpuops.ops.joblogs, `wait` gpuops.ops.wait.

Every operation is one exec channel to the box running one on-box job entry (options and
secrets travel in its stdin; see gpuops.onbox.host.jobrecord).
"""

import json
import os
import time

from .. import engines, errors
from ..boundary import expect
from ..engines.base import command_line
from ..envelope import CODE_KEY, envelope, fixes
from ..engines import answers, statusrow
from ..jobs import errorline, lastseen
from .. import states
from ..jobs.rows import run_tag
from ..onbox.host import plans
from ..onbox.triage import steps
from ..render import engines as words
from ..units import duration
from typing import Optional, Sequence

# The on-box entry that carries out each job action.
ENTRIES = {"launch": "job_launch", "retry": "job_launch", "status": "job_facts", "excerpt": "job_facts",
           "stream": "job_stream", "stop": "job_stop", "queue": "job_queue", "wait": "job_wait",
           "pause": "job_pause", "resume": "job_pause"}


def payload(opts):
    """The options of an on-box action; every action may meet a job of any engine, so each carries
    what each engine's own state words mean (the engines' maps, which the box may not spell)."""
    sent = {k: v for k, v in opts.items() if v is not None}
    sent["engine_phases"] = engines.phases()
    return json.dumps(sent).encode("utf-8")


def raise_reported(target, err: dict) -> None:
    made = errors.for_kind(err.get("kind"))(f"{target.name}: {err.get('message')}")
    if isinstance(made, errors.NotFound):  # a job the box does not know: the ones it does know are the way on
        made.listing = ("gpuops", "status", "--host", target.name)
    raise made


def call(target, action, opts, timeout_s=60):
    """Run one on-box job action; its document once its shape is gpuops's, or the typed error
    it reported."""
    doc = target.run_onbox(ENTRIES[action], [action], stdin=payload(opts), timeout_s=timeout_s)
    if doc.get("error"):
        err = expect(doc, {"error": dict}, target.name)["error"]
        raise_reported(target, expect(err, {"kind": str, "message": str}, target.name, "error"))
    for facts in _facts_in(action, doc):
        answers.facts(facts, target.name)
    return doc


def _facts_in(action, doc):
    if action == "status":
        return doc["jobs"]
    if action in ("stop", "pause"):
        return [doc["after"]]
    if action == "resume":
        return [doc["after"]] + ([doc["child"]] if doc.get("child") is not None else [])
    if action == "queue":
        return [e["job"] for e in doc["entries"] if isinstance(e, dict) and e.get("job") is not None]
    return [doc["job"]]


# ------------------------------------------------------------------ launch / retry


# How long a launch watches the job it started: long enough for a typo (`pythn`), a missing file or
# module to end it, so that it is reported FAILED with its error rather than "started". A script
# that starts many jobs and checks them itself may set GPUOPS_LAUNCH_CONFIRM_S=0.
CONFIRM_S = 1.0
CONFIRM_ENV = "GPUOPS_LAUNCH_CONFIRM_S"


def confirm_seconds(given=None):
    """`given`, else the environment's GPUOPS_LAUNCH_CONFIRM_S, else CONFIRM_S; bounded to [0, 60]."""
    if given is None:
        raw = os.environ.get(CONFIRM_ENV)
        try:
            given = float(raw) if raw else CONFIRM_S
        except ValueError:
            raise errors.UsageError(f"{CONFIRM_ENV}={raw!r} is not a number of seconds") from None
    return min(max(float(given), 0.0), 60.0)


def launch(target, *, command=None, script=None, name: Optional[str]=None, labels=None, env=None, secrets=None,
           workdir=None, gpus=None, key=None, progress_regex=None, jobs_dir=None, profile=None, engine=None,
           resources=None, torchrun=None, timeout_s=60.0, confirm_s=None, share_gpu=False, policy=None):
    """Start a job on `engine` (gpuops.engines; default: the profile's, else the box's supervisor),
    asking it for `resources` (that engine's own flags, checked by it). The box refuses `gpus` it
    lacks, or that a running gpuops job is pinned to unless `share_gpu` (gpuops.onbox.host.gpu_pins).
    With a run `policy` (gpuops.jobs.runpolicy.build) the job is a run: its attempts retried on the
    box as the policy says, under the id this returns."""
    if share_gpu and not gpus:
        raise errors.UsageError("--share-gpu goes with --gpus: it lets the job run on a GPU another gpuops job "
                                "is pinned to")
    pre, notes = None, []
    confirm_s = confirm_seconds(confirm_s)
    eng = engines.get(engine)
    given = dict(resources or {})  # the engine's flags on the command line, before a profile's defaults
    if profile is not None:
        from ..engines import platform

        jobs_dir, env, pre, notes = platform.settings(profile, jobs_dir=jobs_dir, env=env)
        eng = engines.get(engine) if engine else engines.for_profile(profile)
        resources = dict(eng.profile_defaults(profile), **(resources or {}))
    opts = {"name": name, "labels": labels or {}, "env": env or {}, "secrets": secrets or {},
            "workdir": workdir, "gpus": gpus, "key": key, "progress_regex": progress_regex, "jobs_dir": jobs_dir,
            "profile": profile.name if profile is not None else None, "pre": pre, "confirm_s": confirm_s,
            "share_gpu": True if share_gpu else None, "tb_logdir": _tb_logdir(profile)}
    if script is not None:
        import base64

        with open(script, "rb") as f:
            opts.update(kind="script", command=os.path.basename(script),
                        script_b64=base64.b64encode(f.read()).decode("ascii"))
    else:
        opts.update(kind="cmd", command=command)
    asked = eng.submission(opts, dict(resources or {}), torchrun)
    if policy:
        from ..jobs import runpolicy

        runpolicy.check_command(opts["kind"], command, policy)
        eng.check_policy(policy)
        notes = notes + eng.with_policy(opts, policy, given)
    try:
        doc = call(target, "launch", opts, timeout_s + confirm_s)
    except errors.Rejected as e:
        raise eng.explain_rejection(e, asked) from None
    out = _started("launch", target, doc, jobs_dir=jobs_dir, key=key)
    out["advice"] = notes + out["advice"]  # what the profile set up, for the person reading it
    return out


def _tb_logdir(profile):
    """The logdir the platform's own TensorBoard reads, for the supervisor's first-minutes look (U39)."""
    logdir = profile.paths.tensorboard_logdir if profile is not None else None
    return profile.absolute(logdir) if logdir else None


def retry(target, *, job, env=None, secrets=None, resume_arg=None, key=None, jobs_dir=None, resources=None,
          timeout_s=60.0, confirm_s=None, checkpoint_dir=None):
    """A child job of `job` from its immutable command; it may ask its engine for other
    `resources` (that engine's flags: those it names replace the parent's; the box refuses them
    when the parent ran on another engine). A `resume_arg` with {checkpoint} resumes from the
    newest complete checkpoint in `checkpoint_dir` (DIR[:GLOB]; default: its run's)."""
    from ..jobs import runpolicy

    confirm_s = confirm_seconds(confirm_s)
    eng = engines.owner_of_flags(resources or {})
    where, glob = runpolicy.split_checkpoint_dir(checkpoint_dir)
    opts = {"job": job, "env": env or {}, "secrets": secrets or {}, "resume_arg": resume_arg, "key": key,
            "jobs_dir": jobs_dir, "confirm_s": confirm_s, "checkpoint_dir": where, "checkpoint_glob": glob}
    if eng is not None:
        opts.update(eng.retry_opts(resources))
    try:
        doc = call(target, "retry", opts, timeout_s + confirm_s)
    except errors.Rejected as e:
        raise (eng or engines.get()).explain_rejection(e, resources or {}) from None
    out = _started("retry", target, doc, parent=doc.get("parent_job_id"), jobs_dir=jobs_dir)
    resumed = doc.get("checkpoint")
    if isinstance(resumed, dict) and isinstance(resumed.get("path"), str):
        out["data"]["checkpoint"] = resumed
        out["summary"] += f", resuming from {resumed['path']}"
    return out


def _started(verb, target, doc, parent=None, jobs_dir=None, key=None):
    facts = doc["job"]
    row = statusrow.derive(facts)
    meta = facts.get("meta") or {}
    jid = row["job_id"]
    data = {"job": row, "existing": bool(doc.get("existing")), "meta": meta}
    ok = not meta.get("spawn_error")
    if ok:
        nxt = [command_line(target.name, "wait", jid, jobs_dir=jobs_dir, why="returns when it ends, or at the timeout"),
               command_line(target.name, "logs", jid, "--follow", jobs_dir=jobs_dir)]
    else:
        nxt = [command_line(target.name, "logs", jid, "--tail", "50", jobs_dir=jobs_dir)]
    if doc.get("existing"):
        run = row.get("run")
        said = f"run {run['id']}" if run else jid
        # a run answers with its current attempt, whose own record holds no key (its first's does)
        summary = f"job with key {key or meta.get('key')!r} already exists: {said} ({row['state']}); nothing started"
    elif meta.get("spawn_error"):
        summary = f"{jid} could not start: {meta['spawn_error']}"
    elif row["state"] in states.TERMINAL:
        # it ended while the launch watched it: say how, and for a failure the line that says why
        ok = row["state"] == states.COMPLETED
        summary = one_line(row) + " at launch"
        if not ok:  # a completed one keeps the steps of any launch (wait returns at once)
            nxt = job_steps(target.name, row, jobs_dir)
            data["first_error"] = errorline.first_error(doc.get("log_head") or "")
            summary += f": {data['first_error']}" if data["first_error"] else ""
    else:
        summary = (words.of(engines.of_record(meta, target.name).name).started(jid, meta, one_line(row).split(": ", 1)[1])
                   + (f" as a retry of {parent}" if parent else ""))
        if meta.get("policy"):
            from ..jobs import runpolicy

            summary += f": run {jid}, {runpolicy.summary(meta['policy'])}"
        if meta.get("supervisor_lost") or facts.get("wrapper_alive") is False:
            # It runs, but nothing will record how it ends: it will be VANISHED, never COMPLETED.
            ok = False
            summary += ("; but its gpuops supervisor is gone (a job that kills its parent kills it), so its end "
                        "will not be recorded")
    warned = [] if doc.get("existing") else answers.gpu_findings(meta, target.name)
    if warned:
        summary += "; warning: " + "; ".join(f["title"] for f in warned)
    return envelope(verb, ok=ok, summary=summary, data=data, next=nxt, findings=warned,
                    advice=[f["fix"] for f in warned if f["fix"]])


# ------------------------------------------------------------------ status


def status(target, *, job=None, labels: Optional[Sequence[str]]=None, progress_regex=None, stall_factor=steps.STALL_STEPS,
           stall_min_s=steps.STALL_MIN_S, limit: int = 50, jobs_dir=None, timeout_s=60.0, all_attempts=False):
    """The jobs' rows, a run's as one (its current attempt's; with `all_attempts`, its earlier
    attempts in `earlier`, each in the state it ended in); or the one job asked for."""
    opts = {"job": job, "labels": labels or {}, "progress_regex": progress_regex, "limit": limit,
            "jobs_dir": jobs_dir}
    try:
        doc = call(target, "status", opts, timeout_s)
    except errors.HostError as e:
        seen = lastseen.recall(target.name, job) if job else None
        rows = [statusrow.unreachable(job, e.message, seen)] if job else []
        message = e.message
        if seen:
            message += f" (job last seen {seen['state']} {duration(time.time() - seen['seen_at'])} ago)"
        error = dict(e.as_dict(), message=message)
        return envelope("status", ok=False, summary=f"UNREACHABLE: {message}", data={"jobs": rows}, error=error,
                        next=fixes(e))
    rows = [statusrow.derive(f, stall_factor, stall_min_s) for f in doc["jobs"]]
    lastseen.remember(target.name, rows)
    if not job:
        rows = one_row_per_run(rows, all_attempts)
    data = {"jobs": rows, "box_now": doc.get("now"), "jobs_dir": doc.get("jobs_dir"), "total": doc.get("total"),
            "more": max(0, doc.get("more") or 0)}
    if job:
        row = rows[0]
        if row["state"] == states.UNREACHABLE:  # the scheduler, not the host, did not answer
            error = errors.Unreachable(f"{target.name}: {row['reason']}").as_dict()
            return envelope("status", ok=False, summary=f"UNREACHABLE: {row['reason']}", data=data, error=error)
        ok = row["state"] in states.HEALTHY and not row.get("never_runs")
        summary = one_line(row)
        nxt = job_steps(target.name, row, jobs_dir)
    else:
        counts: dict = {}
        for r in rows:
            counts[r["state"]] = counts.get(r["state"], 0) + 1
        ok = True
        summary = (", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no jobs") + f" ({len(rows)} shown"
        summary += f", {data['more']} older)" if data["more"] else ")"
        nxt = []
    return envelope("status", ok=ok, summary=summary, data=data, next=nxt)


def one_row_per_run(rows, earlier=False):
    """Rows (newest first) with each run as one: its current attempt's row, counting its earlier
    attempts (`earlier_attempts`) and, with `earlier`, holding their rows (`earlier`, newest first)."""
    by_id = {r["job_id"]: r for r in rows}
    out = []
    for r in rows:
        current = (r.get("run") or {}).get("current")
        head = by_id.get(current) if current and current != r["job_id"] else None
        if head is None:
            out.append(r)
            continue
        head["earlier_attempts"] = head.get("earlier_attempts", 0) + 1
        if earlier:
            head.setdefault("earlier", []).append(r)
    return out


def job_steps(host: str, row, jobs_dir=None):
    """What to run next about one job, by its state: wait on a live one, look into an ended one
    that did not complete, nothing for one that did."""
    jid, now = row["job_id"], row["state"]
    if row.get("never_runs"):
        return [command_line(host, "stop", jid, jobs_dir=jobs_dir, why="it can never run as asked: cancel it, "
                                                                         "then launch what the partition has")]
    if now == states.PAUSED:
        return [command_line(host, "resume", jid, jobs_dir=jobs_dir, why="continues it from its checkpoint")]
    if now in states.ALIVE:
        return [command_line(host, "wait", jid, jobs_dir=jobs_dir, why="returns when it ends, or at the timeout")]
    if now == states.COMPLETED:  # its log's end says how far it got; its last page is an empty read
        return [command_line(host, "triage", jid, jobs_dir=jobs_dir, why="how far it got and what it logged")]
    if now in states.TERMINAL:
        return [command_line(host, "diagnose", jid, jobs_dir=jobs_dir, why="why it stopped"),
                command_line(host, "triage", jid, jobs_dir=jobs_dir, why="what its log says")]
    return [command_line(host, "logs", jid, "--tail", "50", jobs_dir=jobs_dir)]


def state_now(target, job, jobs_dir=None, timeout_s=10.0):
    """The job's status row as the box sees it now, for a verb stopped half-way that must say
    where the job stands; None when the box does not answer in time."""
    try:
        doc = call(target, "status", {"job": job, "jobs_dir": jobs_dir}, timeout_s)
    except errors.GpuopsError:
        return None
    return statusrow.derive(doc["jobs"][0]) if doc["jobs"] else None


def one_line(row):
    text = f"{row['job_id']}: {row['state']}"
    if row.get("exit_code"):  # a COMPLETED row's 0 goes without saying
        text += f" (exit {row['exit_code']})"
    if row.get("signal"):
        text += f" ({row['signal']})"
    if row.get("reason"):
        text += f": {row['reason']}"
    run = row.get("run")
    if run:
        text += run_tag(run)
    return text


# ------------------------------------------------------------------ stop


def stop(target, *, job, grace=10.0, yes=False, plan=None, signal=None, jobs_dir=None):
    """Stop a job; a dry run unless `yes`. With `plan` (the plan_id of a dry run), only when what
    its engine would stop (the supervisor: its live processes; a scheduler: the job's run) is
    still exactly what was planned: else refused, with the new plan. A scheduler that takes a
    checkpoint `signal` sends it first and waits up to `grace` seconds for the job to end."""
    from ..jobs import spec

    # minted before the call, so the box notes the moment its dry run looked under the plan's id
    expires = plans.expires_at()
    opts = {"job": job, "grace": float(grace), "yes": bool(yes), "jobs_dir": jobs_dir,
            "signal": spec.checkpoint_signal(signal)[0], "expires": expires}
    stale = plan is not None and (plans.expiry(plan) or 0) < time.time()
    if plan is not None and plans.expiry(plan) is None:
        raise errors.UsageError(f"--plan {plan!r} is not a plan id (a dry run of stop shows one)")
    if plan is not None and not stale:
        # how long ago the plan was made, on this clock: the box re-judges which processes it binds
        opts.update(plan=plan, plan_age_s=time.time() - (plans.expiry(plan) - plans.TTL_S))
    doc = call(target, "stop", dict(opts, yes=bool(yes) and not stale), timeout_s=float(grace) + 60)
    jid = doc["job_id"]
    eng = engines.of_record(doc, target.name)
    for t in doc["targets"]:
        expect(t if isinstance(t, dict) else {}, eng.stop_target, target.name, "stop target")
    after = statusrow.derive(doc["after"])
    said = words.of(eng.name)
    targets = [dict(t, shown=said.target(t)) for t in doc["targets"]]
    data = {"job_id": jid, "targets": targets, "state": after["state"], "after": after,
            "signals": doc.get("signals") or [], "remaining": doc.get("remaining") or [],
            "gpu_holders_left": doc.get("gpu_holders_left") or []}
    if stale or doc.get("plan_refused"):
        return _refused_plan(eng, target.name, jid, plan, stale, targets, float(grace), data, jobs_dir, expires)
    run = doc.get("run_stopped")
    if not targets and isinstance(run, str) and not doc.get("dry_run"):
        return envelope("stop", ok=True, summary=f"stopped run {run} between attempts: no attempt starts after a "
                                                 f"stop; {jid} is {after['state']}", data=dict(data, run=run))
    if not targets:
        summary = f"nothing to stop: {jid} is {after['state']} and {said.nothing_alive}"
        return envelope("stop", ok=True, summary=summary, data=data)
    if doc.get("dry_run"):
        shown = _plan(eng, jid, targets, expires)
        again = ["--signal", opts["signal"]] if opts["signal"] else []
        what = said.would_stop(jid, targets, opts["signal"], float(grace))
        out = envelope("stop", ok=False, summary=f"dry run: {what}; add --yes --plan {shown['plan_id']}",
                       data=dict(data, dry_run=True, plan=shown),
                       next=[command_line(target.name, "stop", jid, "--grace", f"{float(grace):g}", *again, "--yes",
                                          "--plan", shown["plan_id"], jobs_dir=jobs_dir)])
        out[CODE_KEY] = errors.REFUSED
        return out
    gone = bool(doc.get("all_gone"))
    summary, advice = said.stopped(data, gone)
    return envelope("stop", ok=gone, summary=summary, data=data, next=eng.stop_steps(target.name, jid, gone, jobs_dir),
                    advice=advice)


def _plan(eng, jid, targets, expires):
    """A stop's plan: what its engine would stop, as its box half identifies it (the supervisor:
    the leader and the lasting processes by pid and start time, not a child that comes and goes;
    a scheduler: the job's run)."""
    shown, pairs = eng.plan(targets)
    return dict(shown, plan_id=plans.plan_id("stop", jid, pairs, expires), expires_at=expires)


def _refused_plan(eng, host: str, jid, plan, stale, targets, grace, data, jobs_dir, expires):
    """Exit 5 with the plan the live set makes now, so the caller can look again and apply that."""
    fresh = _plan(eng, jid, targets, expires) if targets else None
    why = "has expired" if stale else "no longer matches the job's live processes"
    message = f"plan {plan} {why}; nothing was signalled"
    message += (f"; the live set is {len(targets)} process(es): new plan {fresh['plan_id']}" if fresh
                else f"; {jid} has no live process left")
    nxt = [command_line(host, "stop", jid, "--grace", f"{grace:g}", "--yes", "--plan", fresh["plan_id"],
                        jobs_dir=jobs_dir)] if fresh else []
    return envelope("stop", ok=False, summary=message, data=dict(data, dry_run=True, plan=fresh, refused_plan=plan),
                    error={"kind": "refused", "message": message}, next=nxt)


# ------------------------------------------------------------------ queue


def queue(target, *, name: str, content=None, env=None, secrets=None, workdir=None, gpus=None, wait=0.0, cancel=False,
          jobs_dir=None, engine=None, resources=None):
    """A sequential queue: run by a runner on the box, or on an `engine` that chains its entries
    itself (Slurm: a dependency chain, each entry starting after the one before it ended, however
    that ended), asking it for `resources` (its own flags)."""
    opts = {"name": name, "content": content, "env": env or {}, "secrets": secrets or {}, "workdir": workdir,
            "gpus": gpus, "wait": float(wait), "cancel": bool(cancel), "jobs_dir": jobs_dir, "kind": "cmd"}
    eng = engines.get(engine)
    asked = eng.queue_submission(opts, dict(resources or {}))
    if engine:
        opts["engine"] = eng.name
    try:
        doc = call(target, "queue", opts, timeout_s=float(wait) + 60)
    except errors.Rejected as e:
        raise eng.explain_rejection(e, asked) from None
    entries = []
    for entry in doc["entries"]:
        row = statusrow.derive(entry["job"]) if entry.get("job") else {"job_id": None, "state": states.PENDING}
        entries.append({"line": entry["line"], "command": entry["command"], "job_id": row.get("job_id"),
                        "state": row["state"], "exit_code": row.get("exit_code"), "signal": row.get("signal")})
    done = doc.get("done")
    finished = sum(1 for e in entries if e["state"] in states.TERMINAL)
    failed = [e["line"] for e in entries if e["state"] in states.TERMINAL and e["state"] != states.COMPLETED]
    ran_on = engines.of_record(doc, target.name)
    data = {"queue": name, "engine": ran_on.name, "entries": entries, "done": done,
            "runner_alive": doc.get("runner_alive"),
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
        if doc.get("chained"):
            summary += words.of(ran_on.name).queue_note
        elif not doc.get("runner_alive") and not doc.get("runner_started"):
            summary += "; no runner (re-run with --file to resume)"
        ok = not failed
    broken = next((e for e in entries if e["line"] in failed and e["job_id"]), None)
    nxt = job_steps(target.name, broken, jobs_dir) if broken else []
    return envelope("queue", ok=ok, summary=summary, data=data, next=nxt)
