"""False stops and detection times of the stall watch over the corpus of output shapes.

    python3 benchmarks/stalls.py [--limit 6] [--rig]

The corpus is tests/fixtures/progress/shapes.py: healthy shapes of the trainers' own output
(tqdm, HF Trainer, Lightning's tqdm and rich bars, rich, Keras, loguru, Megatron, DeepSpeed, JSON
lines, MaxText, a checkpoint save longer than the limit) and hung ones (SIGSTOP, a silent busy
loop, a repeated watchdog warning, a bar redrawn with the same count, MaxText's busy-wait noise,
silence after a save).

On a virtual clock (tests/fixtures/progress/simulate.py, a round a second as the supervisor's),
each shape is judged by the supervisor's rule (gpuops.onbox.run.progress) and by the rule it replaced
(the log locked to the first built-in form it printed, any line of that form progress, no look at
the checkpoint directory), in the same run. With --rig the corpus also runs for real: one job a
shape under --stall-after on a loopback OpenSSH sshd (tests/rig/sshd.py), all at once, and the
detection time is the stall event's time less the moment the shape's player began to hang.

A false stop is a healthy shape stopped, or a hung one stopped before it began to hang; a shape
the replaced rule never saw progress in counts as stopped at its 300 s start-up limit (a real run
is longer than the replay). A detection time is how long after the hang began the hung shape was
stopped (a miss: never, within the replayed two minutes).
"""

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpuops.onbox.triage import steps  # noqa: E402
from tests.fixtures.progress import shapes, simulate  # noqa: E402

def old_rule(name, limit_s, round_s=simulate.ROUND_S):
    """The replaced rule on the same timeline: the first form a read finds locks the log, any line
    of it is progress. (stall time or None, whether it ever saw progress)."""
    writes, _, _, end = simulate.timeline(shapes.shape(name))
    pending, i, now, forms, last, moved = b"", 0, 0.0, None, 0.0, False
    while now <= end + round_s:
        now += round_s
        while i < len(writes) and writes[i][0] <= now:
            pending += writes[i][1]
            i += 1
        cut = max(pending.rfind(b"\n"), pending.rfind(b"\r")) + 1
        if cut:
            chunk, pending = pending[:cut], pending[cut:]
            if forms is None:
                picked = steps.pick(chunk)
                forms = [picked] if picked else None
            if forms and any(f.last(chunk) is not None for f in forms):
                last, moved = now, True
        if now - last > (limit_s if moved else max(limit_s, 300.0)):
            return now, moved
    return None, moved


def virtual(limit_s):
    rows = []
    for name in list(shapes.HEALTHY) + list(shapes.HANGS):
        new = simulate.replay(name, limit_s)
        hang_at = new["hang_at"]
        old, saw = old_rule(name, limit_s)
        if old is None and not saw:
            old = 300.0  # no progress seen: a run longer than the replay is stopped at the start-up limit
        rows.append((name, hang_at is None, new["stalled_at"], old, hang_at))
    return rows


def rig_runs(limit_s):
    """{name: (stopped, detection_s or None)} of the corpus run as jobs on a loopback sshd."""
    from gpuops.ops import wait as waiting
    from gpuops.remote.targets import target_for
    from tests.jobs.helpers import kill_everything, launch_shape
    from tests.rig.sshd import SshRig

    work = Path(tempfile.mkdtemp(prefix="gpuops-bench-stalls-"))
    rig = SshRig(work / "rig")
    box = rig.box("bench")
    os.environ["GPUOPS_SSH_CONFIG"] = str(rig.ssh_config)
    out = {}
    try:
        subprocess.run(["ssh", "-F", str(rig.ssh_config), "-o", "BatchMode=yes", "-o",
                        "StrictHostKeyChecking=accept-new", box.spec, "true"], check=True, capture_output=True)
        t = target_for(box.spec)
        runs = {name: launch_shape(t, work / "jobs", work, name, limit_s)
                for name in list(shapes.HEALTHY) + list(shapes.HANGS)}
        for name, run in runs.items():
            doc = waiting.wait(t, job=run, jobs_dir=str(work / "jobs"), timeout_s=300, after_event=0)
            stall = next((e for e in doc["data"].get("events") or [] if e["kind"] == "stalled"), None)
            hang_file = work / ("hang-at-" + name)
            took = stall["at"] - float(hang_file.read_text()) if stall and hang_file.exists() else None
            out[name] = (stall is not None, took)
        t.close()
    finally:
        kill_everything(work / "jobs")
        rig.stop()
    return out


def _cell(stalled_at, hang_at):
    if hang_at is None:
        return "stopped at %.0fs (FALSE STOP)" % stalled_at if stalled_at is not None else "ran to its end"
    if stalled_at is None:
        return "MISSED"
    if stalled_at < hang_at:
        return "stopped at %.0fs, before the hang" % stalled_at
    return "stopped %.1fs after the hang" % (stalled_at - hang_at)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=float, default=6.0, help="--stall-after, seconds")
    ap.add_argument("--rig", action="store_true", help="also run the corpus as jobs on a loopback sshd")
    args = ap.parse_args()
    rows = virtual(args.limit)
    real = rig_runs(args.limit) if args.rig else {}
    print("--stall-after %gs; virtual clock (a round a second)%s" % (args.limit, "; and on a loopback sshd box"
                                                                     if real else ""))
    print("%-20s %-36s %-36s %s" % ("shape", "supervisor's rule", "replaced rule", "on the box" if real else ""))
    for name, healthy, new, old, hang_at in rows:
        box = ""
        if name in real:
            stopped, took = real[name]
            box = ("FALSE STOP" if stopped else "ran to its end") if healthy else (
                "stopped %.1fs after the hang" % took if took is not None else "MISSED")
        print("%-20s %-36s %-36s %s" % (name, _cell(new, hang_at), _cell(old, hang_at), box))
    healthy = [r for r in rows if r[1]]
    hung = [r for r in rows if not r[1]]
    for label, index in (("supervisor's rule", 2), ("replaced rule", 3)):
        false = sum(1 for r in healthy if r[index] is not None)
        false += sum(1 for r in hung if r[index] is not None and r[index] < r[4])  # stopped while it was healthy
        times = [r[index] - r[4] for r in hung if r[index] is not None and r[index] >= r[4]]
        print("%s: %d false stops (of %d healthy shapes and %d healthy stretches before a hang); %d of %d hangs "
              "stopped, at most %.1fs after the hang" % (label, false, len(healthy), len(hung), len(times), len(hung),
                                                         max(times) if times else float("nan")))
    if real:
        false = sum(1 for n in shapes.HEALTHY if real[n][0])
        times = [real[n][1] for n in shapes.HANGS if real[n][1] is not None]
        print("on the box: %d false stops of %d healthy shapes; %d of %d hangs stopped, at most %.1fs after the hang"
              % (false, len(shapes.HEALTHY), len(times), len(shapes.HANGS), max(times) if times else float("nan")))


if __name__ == "__main__":
    main()
