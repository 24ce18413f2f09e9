"""How a verdict is put in words: evidence clipping, the restore sentence, the heartbeat and
dashboard sentences, the summary line, and the findings of the envelope."""

from ... import findings as _findings
from ...units import duration
from . import signatures as S


def clip(text: str):
    text = text.rstrip()
    return text if len(text) <= S.EVIDENCE_CHARS else text[:S.EVIDENCE_CHARS - 3] + "..."


def restore_text(f):
    if f.first_step is None:
        return None
    if f.first_step == 0:
        start = "fresh start (step 0)"
    else:
        start = f"restored from checkpoint step {f.first_step - 1}"
    if f.restore is not None:
        kind, step, line = f.restore
        seen = "no existing checkpoint (fresh)" if kind == "fresh" else f"restoring from step {step}"
        start += f"; the log says {seen} at line {line}"
    return start


def heartbeat_sentence(hb) -> str:
    who = ", ".join(str(t) for t in hb["accused"]) or "unknown tasks"
    if hb["verdict"] == "true-positive":
        line, cls, task, _ = hb["prior"][0]
        return (f"Heartbeat checklist: task {task} failed first ({cls}, line {line}) before being accused, so the "
                "timeout is a true positive; fix that failure.")
    if hb["verdict"] == "confirmed-false-positive":
        tasks = ", ".join(str(t) for t in hb["self_reported"])
        return (f"Heartbeat checklist: accused task(s) {who}; task(s) {tasks} logged the coordination error "
                "themselves, so they were alive: a confirmed false positive.")
    return (f"Heartbeat checklist: accused task(s) {who}; no crash on them before the accusation, so treat it as "
            "a false positive.")


def dashboard_sentences(d, job_dir):
    port = d["prometheus_port"]
    if d["live"]:
        where = f"http://{d['head_host']}:{port}" if d["head_host"] else f"port {port} on the Ray head node"
        out = [f"Live Prometheus for this job: {where}, reachable from the head node's network (not localhost:9090, "
               "which may be a different, cluster-wide Prometheus)."]
        if d["tunnel"]:
            out.append(f"The SSH tunnel command in the log (line {d['tunnel_line']}) binds ports on the user's laptop "
                       f"through the jump host: {d['tunnel']}")
        out.append(f"Offer to set up port forwarding for the Ray Dashboard ({S.RAY_DASHBOARD_PORT}), TensorBoard "
                   f"({S.TENSORBOARD_PORT}) and Prometheus ({port}).")
        return out
    tsdb = f"{job_dir}/prometheus" if job_dir else "the job directory's prometheus/"
    return [f"The job has ended, so its live dashboards are gone; for the post-mortem start a read-only Prometheus "
            f"on the persisted TSDB: utils/prometheus.sh view {tsdb}."]


# The classes whose name is a developer's word for what happened: a summary says it in words.
PLAIN = {"unknown-death": "the run was killed from outside", "hang": "training hung"}


def summary_line(data):
    """'failed: oom-host (also nccl-timeout); 211 of 5000 steps': the steps counted as done, as the
    progress line counts them (the 0-indexed last step 79 of an 80-step run is 80 of 80)."""
    p = data["progress"]
    text = f"{data['status']}"
    if data["primary"]:
        text += f": {PLAIN.get(data['primary'], data['primary'])}"
    if data["also"]:
        also = [PLAIN.get(c, c) for c in data["also"][:4]]
        text += f" (also {', '.join(also)}{'...' if len(data['also']) > 4 else ''})"
    if p["last_step"] is not None:
        done = p["last_step"] + 1
        text += f"; {done} of {p['total_steps']} steps" if p["total_steps"] else f"; {done} steps"
    return text


def stopped_text(v) -> str:
    """'; stopped logging 3h 10m before now (950 step times)' for a log that stopped logging."""
    if v.stopped_for is None:
        return ""
    times = f" ({int(v.stopped_for / v.step_time)} step times)" if v.step_time else ""
    return f"; stopped logging {duration(v.stopped_for)} before now{times}"


def findings_for(data, found, eligible, verdict, context, heartbeat, dashboards):
    out = []
    live = data["status"] in ("completed", "running")
    for name in ([data["primary"]] if data["primary"] else []) + data["also"]:
        cls = verdict.class_of(name)
        if name == data["primary"]:
            severity = "warn" if live else "fail"
        elif cls.role in ("root", "cause") and data["status"] != "completed":
            severity = "warn"
        else:
            severity = "info"
        occ = eligible.get(name) or (found[name].first[0] if name in found else None)
        evidence = {"count": found[name].count if name in found else 0}
        if occ is not None:
            evidence.update(line=occ.line, text=clip(occ.decoded()))
        out.append(_findings.Finding(f"triage.{name}", severity, cls.what, evidence,
                                     verdict.fix_for(name, data["status"]), cls.gotcha))
    if heartbeat:
        out.append(_findings.Finding("triage.heartbeat-checklist", "info", heartbeat_sentence(heartbeat),
                                     {"verdict": heartbeat["verdict"], "accused": heartbeat["accused"],
                                      "self_reported": heartbeat["self_reported"],
                                      "failed_first": [{"task": t, "class": c, "line": ln}
                                                       for ln, c, t, _ in heartbeat["prior"]]}))
    if dashboards:
        out.append(_findings.Finding("triage.ray-dashboards", "info", "RAY=1 job: where its dashboards are",
                                     {k: v for k, v in dashboards.items()}))
    if any(c not in (0,) + S.CANCEL_EXITS for c in verdict.f.node_exits.values()):
        out.append(_findings.Finding("triage.node-exits", "info", "exit code per node (NODE_EXIT lines)",
                                     dict(list(verdict.f.node_exits.items())[:64])))
    out.append(_findings.Finding("triage.context", "info", "what the triage read and assumed",
                                 {k: v for k, v in context.items() if v is not None}))
    return out
