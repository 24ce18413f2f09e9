"""Tracker verdicts: will the run's curves reach W&B (U35), and does TensorBoard read where the
events are (U39)? From the probe's `trackers` facts (gpuops.onbox.track.trackers), and, in a run's first
minutes, from its supervisor's (gpuops.onbox.track.trackwatch), which add `writes`: the directories of
the event files the job holds open. Shipped: the supervisor judges with these same rules."""

from ...findings import Finding

OFFLINE = ("offline", "dryrun")


def _key_fix(w) -> str:
    return (f"gpuops launch ... --secret-env WANDB_API_KEY   # sent through stdin, never argv; or keep one on the "
            f"box: grep -A 2 'machine {w.get('host')}' ~/.netrc | ssh BOX 'umask 077; cat >> ~/.netrc'")


def wandb(facts, t) -> list:
    w = (facts.get("trackers") or {}).get("wandb")
    mode = ((w or {}).get("mode") or "").strip().lower()
    if not w or not (w.get("installed") or mode):
        return []
    evidence = {"installed": w.get("installed"), "mode": w.get("mode"), "key": w.get("key"), "host": w.get("host")}
    if mode == "disabled":
        return [Finding("tracker.wandb", "warn", "WANDB_MODE=disabled on the box: runs send W&B nothing, not even "
                        "an offline copy", evidence, "unset WANDB_MODE   # or WANDB_MODE=online, before launching",
                        "U35")]
    if not w.get("key") and mode in OFFLINE:
        return [Finding("tracker.wandb", "warn", f"WANDB_MODE={w.get('mode')} and no W&B key on the box: a logger "
                        "wrapper that logs in before wandb.init turns W&B off entirely, so the run keeps no curves",
                        evidence, _key_fix(w), "U35")]
    if not w.get("key"):
        return [Finding("tracker.wandb", "warn", "wandb is installed but the box has no W&B key (WANDB_API_KEY, "
                        f"or a netrc entry for {w.get('host')}): in a detached run wandb.init stops with 'No API key "
                        "configured'", evidence, _key_fix(w), "U35")]
    note = "; WANDB_MODE=offline: curves appear only after `wandb sync`" if mode in OFFLINE else ""
    return [Finding("tracker.wandb", "ok", f"W&B key found ({w.get('key')}) for {w.get('host')}{note}", evidence)]


def _empty(d):
    return "does not exist" if not d.get("exists") else "holds no event files"


def _under(path, logdir):
    base = (logdir or "").rstrip("/")
    return bool(base) and (path == base or path.startswith(base + "/"))


def _unread(tb, servers, pinned):
    """(the job's event directories that no TensorBoard here reads, the directories they read)."""
    read = [d.get("path") for s in servers for d in s.get("logdirs") or [] if d.get("path")]
    read += [pinned["path"]] if pinned and pinned.get("path") else []
    return [w for w in tb.get("writes") or [] if not any(_under(w, r) for r in read)], read


def tensorboard(facts, t):
    tb = (facts.get("trackers") or {}).get("tensorboard")
    if not tb:
        return []
    pinned, servers = tb.get("pinned"), tb.get("servers") or []
    lost, read = _unread(tb, servers, pinned)
    out, shown = [], []
    for server in servers:
        for d in server.get("logdirs") or []:
            shown.append(f"{d.get('path')} ({d.get('events')} event files)")
            if d.get("exists") and d.get("events"):
                continue
            elsewhere = f"; the job writes its events to {lost[0]}" if lost else ""
            if pinned and pinned.get("events") and pinned.get("path") != d.get("path"):
                elsewhere = f"; the events are under {pinned.get('path')}"
            out.append(Finding("tb.logdir", "warn", f"TensorBoard (pid {server.get('pid')}) reads {d.get('path')}, "
                               f"which {_empty(d)}: its panel shows no runs{elsewhere}",
                               {"pid": server.get("pid"), "logdir": d.get("path"), "exists": d.get("exists"),
                                "pinned": (pinned or {}).get("path")},
                               f"ln -sfn <your runs dir> {d.get('path')}/<run>   # or start TensorBoard with --logdir "
                               "the directory your SummaryWriter writes", "U39"))
    if out:
        return out
    if lost and read:
        return [Finding("tb.logdir", "warn", f"the job writes its TensorBoard events to {lost[0]}, which no "
                        f"TensorBoard here reads (they read {', '.join(read[:4])}): its panel never shows this run",
                        {"writes": lost[:8], "read": read[:8]},
                        f"ln -sfn {lost[0]} {read[0]}/<run>   # or point SummaryWriter(log_dir=...) under {read[0]}",
                        "U39")]
    if pinned and not pinned.get("events"):
        return [Finding("tb.logdir", "info", f"the platform's TensorBoard reads {pinned.get('path')}, which "
                        f"{_empty(pinned)} yet: write your runs there or its panel stays empty",
                        {"pinned": pinned.get("path")},
                        f"SummaryWriter(log_dir='{pinned.get('path')}/<run>')   # or: ln -sfn <your runs dir> "
                        f"{pinned.get('path')}/<run>")]
    if shown:
        return [Finding("tb.logdir", "ok", "TensorBoard reads " + ", ".join(shown), {"servers": len(servers)})]
    return []


CHECKS = (wandb, tensorboard)
