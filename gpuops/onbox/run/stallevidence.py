"""Evidence of a stall, captured by the job's supervisor before its stall kill: once the process
tree is gone, so is the only chance to see where each rank was stuck (seed 002: read each rank's
stack to find the stuck collective; U43: py-spy is the attach that tells a hang from a quiet log).

    {at, took_s, log_tail: [lines], processes: [...], gpu: {src, error, gpus, processes},
     py_spy: its path or null, skipped: [{pid, why}], truncated}
    process: {pid, ppid, comm, state, wchan, threads: {state: count}, thread_wchans: {wchan: count},
              python, rss, stack (py-spy's dump) or stack_error}

Every process gets its state and kernel wait channel from /proc (a rank in `futex_wait` or
`ep_poll` is waiting on a peer; `R` with a busy GPU is spinning in a collective); the Python ones
also get `py-spy dump` when py-spy is on the box's PATH, the largest first (ranks hold the CUDA
context and the model, their DataLoader workers far less) and at most MAX_STACKS of them. py-spy
needs ptrace rights: where it is refused, its error is kept and the /proc facts stand alone.

Never hangs: the py-spy dumps run side by side, each killed at its deadline (gpuops.onbox.host.runcmd),
all within `budget_s`; the GPU snapshot goes through gpu_light under its own timeouts. Bounded:
lines and stacks are cut, and the whole document is kept under max_bytes.
"""

import json
import os
import shutil
import time

from ..host import gpu_light, jobrecord, procs, ringlog, runcmd, sysroot, telemetry
from typing import Sequence

LOG_LINES, LINE_MAX, LOG_READ = 200, 500, 256 << 10
MAX_STACKS, STACK_MAX = 16, 32 << 10
MAX_THREADS = 512
BUDGET_S, PER_PROCESS_S = 30.0, 15.0
MAX_BYTES = 256 << 10


def log_tail(path, lines=LOG_LINES):
    """The last `lines` lines of the job's log, each cut to LINE_MAX characters."""
    data, _ = ringlog.tail_bytes(path, LOG_READ)
    text = data.decode("utf-8", "replace").replace("\r", "\n")
    return [l[:LINE_MAX] for l in text.split("\n")[-lines - 1:] if l.strip()][-lines:]


def _wchan(pid: int, tid=None):
    where = "/proc/%d/task/%d/wchan" % (pid, tid) if tid else "/proc/%d/wchan" % pid
    return sysroot.read(where) or None


def is_python(pid: int, st):
    comm = (st or {}).get("comm") or ""
    if comm.startswith(("python", "pt_")):  # torch renames its threads pt_*, and some processes
        return True
    try:
        exe = os.readlink(sysroot.path("/proc/%d/exe" % pid))
    except OSError:
        exe = ((procs.cmdline(pid) or "").split(" ") or [""])[0]
    return os.path.basename(exe).startswith("python")


def process_facts(pid: int):
    """State, wait channel and thread summary of one process from /proc, or None when it is gone."""
    st = procs.stat(pid)
    if st is None:
        return None
    doc = {"pid": pid, "ppid": st["ppid"], "comm": st["comm"], "state": st["state"], "wchan": _wchan(pid),
           "python": is_python(pid, st), "rss": telemetry.rss_bytes(pid), "threads": {}, "thread_wchans": {}}
    for tid in sysroot.listdir("/proc/%d/task" % pid)[:MAX_THREADS]:
        if not tid.isdigit():
            continue
        text = sysroot.read("/proc/%d/task/%s/stat" % (pid, tid)) or ""
        state = (text.rpartition(")")[2].split() or ["?"])[0]
        doc["threads"][state] = doc["threads"].get(state, 0) + 1
        where = _wchan(pid, int(tid)) or "-"
        doc["thread_wchans"][where] = doc["thread_wchans"].get(where, 0) + 1
    return doc


def _stacks(processes, py_spy, deadline, per_process_s, skipped) -> None:
    """py-spy dump of the largest Python processes, side by side, each under its own deadline."""
    python = sorted((p for p in processes if p["python"]), key=lambda p: -(p.get("rss") or 0))
    for p in python[MAX_STACKS:]:
        skipped.append({"pid": p["pid"], "why": "more than %d Python processes: the largest were dumped" % MAX_STACKS})
    running = []
    for p in python[:MAX_STACKS]:
        left = deadline - time.time()
        if left <= 0:
            skipped.append({"pid": p["pid"], "why": "the evidence budget was spent"})
            continue
        running.append((p, runcmd.start([py_spy, "dump", "--pid", str(p["pid"])], min(per_process_s, left))))
    for p, pending in running:
        r = runcmd.finish(pending)
        if r["error"] is None and r["rc"] == 0:
            p["stack"] = r["out"][:STACK_MAX]
        else:
            why = r["error"] or (r["err"].strip() or r["out"].strip() or "exit %s" % r["rc"])
            p["stack_error"] = "py-spy: %s" % why[-300:]


def _gpu(reader) -> dict:
    try:
        doc = (reader or gpu_light.Reader()).read(apps=True, extra=telemetry.EXTRA)
    except Exception as e:  # a wedged driver must not cost the rest of the evidence
        return {"src": None, "error": "%s: %s" % (type(e).__name__, e), "gpus": [], "processes": []}
    return {"src": doc.get("source"), "error": doc.get("error"), "gpus": telemetry.gpu_rows(doc),
            "processes": doc.get("processes") or []}


def _fit(doc, max_bytes):
    """Cut stacks, then log lines, until the document's JSON is under max_bytes."""
    def size():
        return len(json.dumps(doc))

    stacked = [p for p in doc["processes"] if p.get("stack")]
    while size() > max_bytes and stacked:
        doc["truncated"] = True
        room = max(200, max(len(p["stack"]) for p in stacked) // 2)
        for p in stacked:
            p["stack"] = p["stack"][:room]
        if room == 200:
            break
    while size() > max_bytes and doc["log_tail"]:
        doc["truncated"] = True
        doc["log_tail"] = doc["log_tail"][len(doc["log_tail"]) // 2 + 1:]
    while size() > max_bytes and doc["processes"]:
        doc["truncated"] = True
        doc["processes"].pop()
    return doc


def capture(log_path, pids: Sequence[int], budget_s=BUDGET_S, per_process_s=PER_PROCESS_S, lines=LOG_LINES, reader=None,
            max_bytes=MAX_BYTES):
    """The evidence document for the job whose processes are `pids` (telemetry.members)."""
    started = time.time()
    deadline = started + max(0.0, budget_s)
    doc = {"at": round(started, 3), "log_tail": log_tail(log_path, lines), "processes": [], "skipped": [],
           "truncated": False}
    doc["processes"] = [f for f in (process_facts(pid) for pid in pids) if f is not None]
    doc["py_spy"] = shutil.which("py-spy")
    if doc["py_spy"]:
        _stacks(doc["processes"], doc["py_spy"], deadline, per_process_s, doc["skipped"])
    doc["gpu"] = _gpu(reader)
    doc["took_s"] = round(time.time() - started, 3)
    return _fit(doc, max_bytes)


def save(job_dir, attempt, doc):
    """Write the evidence beside the job's record as stall-<attempt>.json; its path."""
    path = os.path.join(job_dir, "stall-%d.json" % int(attempt))
    jobrecord.write_json(path, doc)
    return path
