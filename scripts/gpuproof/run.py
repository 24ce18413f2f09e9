"""Run the proof on a machine with an NVIDIA GPU: `python3 -m gpuproof.run OUTDIR` (scripts/gpu-proof).

Every gpuops answer comes from the real CLI in a subprocess, as a user gets it, with its jobs
directory and workstation state under OUTDIR/work. The proof itself never creates a CUDA context
(NVML and nvidia-smi need none), so the only GPU holders are the ones it starts on purpose. A step
that breaks is recorded with its traceback and the next one runs: one bad answer must not hide the
others, and the GPU minutes are too scarce for a second try at what the first could have shown.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

from . import compare, qualify, report, smixml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
WORKLOADS = HERE / "workloads"
NO_GPU = 4
BUDGET_S = 540.0
SMI_QUERIES = {
    "help-query-gpu": ["nvidia-smi", "--help-query-gpu"],
    "help-query-compute-apps": ["nvidia-smi", "--help-query-compute-apps"],
    "q": ["nvidia-smi", "-q"],
    "q-temperature": ["nvidia-smi", "-q", "-d", "TEMPERATURE"],
    "q-performance-ecc": ["nvidia-smi", "-q", "-d", "PERFORMANCE,ECC"],
    "L": ["nvidia-smi", "-L"],
    "version": ["nvidia-smi", "--version"],
}


def gpu_missing():
    """Why this machine cannot run the proof, or None."""
    if shutil.which("nvidia-smi") is None:
        return "nvidia-smi is not on PATH"
    try:
        r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "nvidia-smi -L failed: %s" % e
    if r.returncode != 0 or "GPU " not in r.stdout:
        return "nvidia-smi -L lists no GPU (exit %d: %s)" % (r.returncode, (r.stderr or r.stdout).strip()[:200])
    return None


class Proof(object):
    def __init__(self, outdir):
        self.out = Path(outdir)
        self.raw = self.out / "raw"
        self.work = self.out / "work"
        for d in (self.raw, self.work / "jobs", self.work / "state", self.work / "shadow"):
            d.mkdir(parents=True, exist_ok=True)
        # A pynvml that cannot be imported: the same probe then takes its nvidia-smi path.
        (self.work / "shadow" / "pynvml.py").write_text("raise ImportError('hidden by gpu-proof')\n")
        self.started = time.monotonic()
        self.steps = []
        self.calls = []  # every command's argv, exit and seconds: what a real nvidia-smi costs, for the fakes
        self.env = dict(os.environ, GPUOPS_JOBS_DIR=str(self.work / "jobs"), GPUOPS_STATE_DIR=str(self.work / "state"),
                        NO_COLOR="1", PYTHONUNBUFFERED="1",
                        PYTHONPATH=os.pathsep.join([str(REPO)] + ([os.environ["PYTHONPATH"]]
                                                                 if os.environ.get("PYTHONPATH") else [])))

    # ------------------------------------------------------------------------------------ I/O helpers

    def save(self, name, text):
        (self.raw / name).write_text(text if isinstance(text, str) else json.dumps(text, indent=1, default=str))

    def sh(self, argv, name=None, timeout=60, env=None):
        t0 = time.monotonic()
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env or self.env, cwd=str(REPO))
            res = {"argv": argv, "rc": r.returncode, "out": r.stdout, "err": r.stderr}
        except subprocess.TimeoutExpired as e:
            res = {"argv": argv, "rc": None, "out": _text(e.stdout), "err": "timed out after %ss" % timeout}
        except OSError as e:
            res = {"argv": argv, "rc": None, "out": "", "err": str(e)}
        res["seconds"] = round(time.monotonic() - t0, 3)
        self.calls.append({"argv": [str(a) for a in argv][:8], "rc": res["rc"], "seconds": res["seconds"]})
        if name:
            self.save(name + ".out", res["out"])
            if res["err"]:
                self.save(name + ".err", res["err"])
        return res

    def gpuops(self, *args, name=None, timeout=120, env=None):
        """(envelope or None, result) of `gpuops ARGS --json`."""
        r = self.sh([sys.executable, "-m", "gpuops"] + list(args) + ["--json"], name=name, timeout=timeout, env=env)
        try:
            doc = json.loads(r["out"])
        except ValueError:
            doc = None
        return doc, r

    def python(self, code, name=None, timeout=60):
        return self.sh([sys.executable, "-c", code], name=name, timeout=timeout)

    def step(self, name, fn):
        rec = {"name": name, "checks": [], "rows": [], "notes": [], "error": None}
        t0 = time.monotonic()
        try:
            fn(rec)
        except Exception:
            rec["error"] = traceback.format_exc()[-4000:]
        rec["seconds"] = round(time.monotonic() - t0, 2)
        rec["ok"] = rec["error"] is None and all(c["ok"] for c in rec["checks"]) and not compare.failures(rec["rows"])
        self.steps.append(rec)
        print("gpu-proof: %-16s %s in %.1fs" % (name, "ok" if rec["ok"] else "FAILED", rec["seconds"]), flush=True)
        return rec

    def left_s(self):
        return BUDGET_S - (time.monotonic() - self.started)

    def shadowed_env(self):
        """The environment in which pynvml cannot be imported: gpuops' nvidia-smi paths run."""
        return dict(self.env, PYTHONPATH=os.pathsep.join([str(self.work / "shadow"), self.env["PYTHONPATH"]]))

    def xml_reference(self, name):
        r = self.sh(["nvidia-smi", "-q", "-x"], name=name, timeout=30)
        return smixml.parse(r["out"])

    def launch(self, name, argv):
        cmd = " ".join(_quote(a) for a in argv)
        doc, r = self.gpuops("launch", "--name", name, "--cmd", cmd, name="launch-" + name)
        if doc is None:
            raise RuntimeError("launch %s printed no envelope: %s" % (name, r["err"][-500:]))
        return doc

    def wait(self, name, timeout_s):
        doc, _ = self.gpuops("wait", "--job", name, "--timeout", str(int(timeout_s)), name="wait-" + name,
                             timeout=timeout_s + 30)
        return doc


def check(rec, what, ok, detail=None):
    rec["checks"].append({"what": what, "ok": bool(ok), "detail": detail})
    return bool(ok)


def _text(b):
    if b is None:
        return ""
    return b.decode("utf-8", "replace") if isinstance(b, bytes) else b


def _quote(word):
    import shlex

    return shlex.quote(str(word))


def _wait_file(path, timeout_s):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if path.exists():
            return path.read_text().strip()
        time.sleep(0.2)
    return None


# ------------------------------------------------------------------------------------------ steps

def step_facts(p, rec):
    """What the machine's own tools say, kept raw for the report and for the fakes' fixtures."""
    for name, argv in SMI_QUERIES.items():
        r = p.sh(argv, name="nvidia-smi-" + name, timeout=30)
        check(rec, "nvidia-smi %s answers" % " ".join(argv[1:]), r["rc"] == 0, r["err"].strip()[:200] or None)
    from gpuops.onbox.host import gpu, smi

    for label, fields in (("core+optional", gpu.CORE_FIELDS + gpu.OPTIONAL_FIELDS), ("apps", gpu.APP_FIELDS),
                          ("light", smi.FIELDS + [smi.NAME_FIELD])):
        flag = "--query-compute-apps=" if label == "apps" else "--query-gpu="
        r = p.sh(["nvidia-smi", flag + ",".join(f for f, _, _ in fields), "--format=csv,noheader,nounits"],
                 name="csv-" + label, timeout=30)
        check(rec, "the probe's %s CSV query is accepted" % label, r["rc"] == 0, (r["err"] or r["out"]).strip()[:300])
    listed = p.sh(["nvidia-smi", "--help-query-gpu"], timeout=30)["out"]
    for f, _, _ in gpu.CORE_FIELDS + gpu.OPTIONAL_FIELDS + smi.FIELDS:
        check(rec, "field %s is in --help-query-gpu" % f, ('"%s"' % f) in listed)
    info = {}
    for path in sorted(Path("/proc/driver/nvidia/gpus").glob("*/information")):
        info[str(path)] = path.read_text(errors="replace")
    for path in ("/proc/driver/nvidia/version",):
        if os.path.exists(path):
            info[path] = Path(path).read_text(errors="replace")
    info["/dev"] = sorted(n for n in os.listdir("/dev") if n.startswith("nvidia"))
    p.save("driver-files.json", info)
    p.sh(["sh", "-c", "dmesg 2>&1 | grep -iE 'nvrm|xid|nvidia' | tail -n 50"], name="dmesg-nvidia", timeout=20)
    r = p.python("import importlib.metadata, json, torch, platform; print(json.dumps({'python': platform.python_version(), "
                 "'torch': torch.__version__, 'torch_cuda': torch.version.cuda, 'cuda_available': "
                 "torch.cuda.is_available(), 'devices': [{'name': torch.cuda.get_device_name(i), 'capability': "
                 "'%d.%d' % torch.cuda.get_device_capability(i), 'total_mib': "
                 "torch.cuda.get_device_properties(i).total_memory / 2**20} for i in range(torch.cuda.device_count())], "
                 "'arch_list': torch.cuda.get_arch_list(), 'pynvml': importlib.metadata.version('nvidia-ml-py')}))",
                 name="torch-cuda", timeout=90)
    check(rec, "torch sees the GPU", r["rc"] == 0 and '"cuda_available": true' in r["out"], r["err"][-300:] or None)
    rec["notes"].append("torch/NVML: " + r["out"].strip()[:400])


def _preflight(p, rec, label, env=None, want_source=None):
    doc, r = p.gpuops("preflight", name="preflight-" + label, env=env, timeout=120)
    ref = p.xml_reference("nvidia-smi-q-x-" + label)
    if not check(rec, "preflight printed an envelope", doc is not None, r["err"][-300:] or None):
        return None, ref
    facts = doc["data"]
    g = facts.get("gpu") or {}
    rec["notes"].append("preflight: %s (exit %s, %.1fs)" % (doc.get("summary"), r["rc"], r["seconds"]))
    if want_source:
        check(rec, "GPU facts came from %s" % want_source, g.get("source") == want_source,
              "source %s; nvml: %s" % (g.get("source"), g.get("nvml")))
    torch_ref = _torch_caps(p)
    extra = ()
    if torch_ref:
        for d in ref["devices"]:
            d["compute_cap"] = torch_ref.get(d["index"])
        extra = (("compute_cap", "exact", None),)
    rec["rows"] += compare.devices(g, ref, extra_fields=extra)
    rec["rows"] += compare.verdicts(facts, ref)
    return doc, ref


def _torch_caps(p):
    path = p.raw / "torch-cuda.out"
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return dict((i, d["capability"]) for i, d in enumerate(info.get("devices") or []))


def step_preflight_nvml(p, rec):
    _preflight(p, rec, "nvml", want_source="nvml")


def step_preflight_smi(p, rec):
    _preflight(p, rec, "smi", env=p.shadowed_env(), want_source="nvidia-smi")


def _both_paths(p, rec, label):
    """gpuops' NVML document and its nvidia-smi document, read back to back in this process."""
    import pynvml

    from gpuops.onbox.host import gpu

    nvml_doc, err = gpu.from_nvml(pynvml)
    smi_doc = gpu.finish_smi(gpu.start_smi())
    p.save("nvml-vs-smi-%s.json" % label, {"nvml": nvml_doc, "nvml_error": err, "smi": smi_doc})
    if not check(rec, "NVML initialises (%s)" % label, nvml_doc is not None, err):
        return None, smi_doc
    rec["rows"] += compare.devices(nvml_doc, smi_doc, extra_fields=(("compute_cap", "exact", None),))
    rec["rows"] += compare.processes(nvml_doc, smi_doc)
    return nvml_doc, smi_doc


def step_nvml_vs_smi(p, rec):
    _both_paths(p, rec, "idle")


def step_train(p, rec):
    ckpt = p.work / "train-ckpt.pt"
    width = int(os.environ.get("GPUPROOF_WIDTH", "4096"))  # the tests' CPU rehearsal trains a narrower model
    doc = p.launch("proof-train", [sys.executable, WORKLOADS / "train.py", 300, ckpt, width])
    job = doc["data"]["job"]
    check(rec, "launch answered with a job id", bool(job.get("job_id")), doc.get("summary"))
    waited = p.wait("proof-train", 150)
    state = ((waited or {}).get("data") or {}).get("state")
    check(rec, "the job reached COMPLETED", state == "COMPLETED", (waited or {}).get("summary"))
    st, _ = p.gpuops("status", "--job", "proof-train", name="status-train")
    sj = _status_job(st)
    check(rec, "status says COMPLETED with exit 0", sj.get("state") == "COMPLETED" and sj.get("exit_code") in (0, None),
          "state %s exit %s" % (sj.get("state"), sj.get("exit_code")))
    last = ((sj.get("progress") or {}).get("last") or {}).get("step")
    check(rec, "status read the last progress step (300)", last == 300, "last step %s" % last)
    tri, _ = p.gpuops("triage", "--job", "proof-train", name="triage-train")
    td = (tri or {}).get("data") or {}
    check(rec, "triage says completed", td.get("status") == "completed", (tri or {}).get("summary"))
    check(rec, "the checkpoint was written", ckpt.exists())
    logs, _ = p.gpuops("logs", "--job", "proof-train", "--tail", "5", name="logs-train")
    rec["notes"].append("log tail: " + json.dumps(((logs or {}).get("data") or {}).get("text", ""))[:300])


def step_oom(p, rec):
    p.launch("proof-oom", [sys.executable, WORKLOADS / "oom.py"])
    waited = p.wait("proof-oom", 90)
    state = ((waited or {}).get("data") or {}).get("state")
    check(rec, "the OOM job ended FAILED", state == "FAILED", (waited or {}).get("summary"))
    diag, _ = p.gpuops("diagnose", "--job", "proof-oom", name="diagnose-oom")
    dd = (diag or {}).get("data") or {}
    check(rec, "diagnose: failed-exit", dd.get("verdict") == "failed-exit", (diag or {}).get("summary"))
    check(rec, "diagnose carries triage's oom-gpu", (dd.get("triage") or {}).get("primary") == "oom-gpu",
          json.dumps(dd.get("triage"))[:300])
    tri, _ = p.gpuops("triage", "--job", "proof-oom", name="triage-oom")
    td = (tri or {}).get("data") or {}
    check(rec, "triage: failed, oom-gpu", td.get("status") == "failed" and td.get("primary") == "oom-gpu",
          (tri or {}).get("summary"))
    text = json.dumps(tri or {})
    check(rec, "torch's own OOM message is the evidence", "CUDA out of memory" in text)
    check(rec, "the advice carries torch's allocator hint", "expandable_segments" in text)


def _status_job(doc):
    jobs = ((doc or {}).get("data") or {}).get("jobs") or [{}]
    return jobs[0]


def _holder(doc, pid):
    return next((h for h in ((doc or {}).get("data") or {}).get("holders") or [] if h.get("pid") == pid), None)


def step_reap(p, rec):
    live_ready, zombie_ready = p.work / "live.ready", p.work / "zombie.ready"
    p.launch("proof-live", [sys.executable, WORKLOADS / "hold.py", 1024, live_ready, 200])
    # A launcher that starts the holder in a session of its own and exits at once: the holder is
    # left without its parent and outside this process's session, as a dead notebook's kernel is.
    launcher = "import subprocess, sys; subprocess.Popen(sys.argv[1:], start_new_session=True)"
    subprocess.run([sys.executable, "-c", launcher, sys.executable, str(WORKLOADS / "hold.py"), "4096",
                    str(zombie_ready), "200"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, cwd=str(p.work), timeout=30)
    live_pid, zombie_pid = _wait_file(live_ready, 90), _wait_file(zombie_ready, 90)
    if not check(rec, "both holders hold their memory", live_pid and zombie_pid, "live %s zombie %s" % (live_pid, zombie_pid)):
        return
    live_pid, zombie_pid = int(live_pid), int(zombie_pid)
    rec["notes"].append("live job pid %d (1 GiB), zombie pid %d (4 GiB)" % (live_pid, zombie_pid))
    time.sleep(2)  # the CUDA context's start-up CPU burst ends before the idle window starts
    nvml_doc, smi_doc = _both_paths(p, rec, "holders")
    for label, d in (("NVML", nvml_doc), ("nvidia-smi", smi_doc)):
        pids = set(x.get("pid") for x in (d or {}).get("processes") or [])
        check(rec, "%s lists both holders" % label, {live_pid, zombie_pid} <= pids, sorted(pids))
    pf, _ = p.gpuops("preflight", name="preflight-holders")
    holders = set(h.get("pid") for h in ((pf or {}).get("data", {}).get("gpu") or {}).get("holders") or [])
    check(rec, "preflight's VRAM holders include both", {live_pid, zombie_pid} <= holders, sorted(holders))
    dry, _ = p.gpuops("reap", "--min-age", "0", "--idle-window", "3", name="reap-plan", timeout=90)
    z, l = _holder(dry, zombie_pid), _holder(dry, live_pid)
    check(rec, "reap plans the zombie", z is not None and z.get("class") in ("orphan", "idle"),
          z and "%s: %s" % (z.get("class"), z.get("reason")))
    check(rec, "reap keeps the live job", l is not None and l.get("class") == "live",
          l and "%s: %s" % (l.get("class"), l.get("reason")))
    # The same plan through nvidia-smi alone (a box whose python3 lacks pynvml) must judge alike.
    smi, _ = p.gpuops("reap", "--min-age", "0", "--idle-window", "3", name="reap-plan-smi", timeout=90,
                      env=p.shadowed_env())
    zs, ls = _holder(smi, zombie_pid), _holder(smi, live_pid)
    check(rec, "through nvidia-smi alone: the same classes",
          (zs or {}).get("class") == (z or {}).get("class") and (ls or {}).get("class") == (l or {}).get("class"),
          "%s / %s; source %s" % ((zs or {}).get("class"), (ls or {}).get("class"),
                                 ((smi or {}).get("data") or {}).get("gpu_source")))
    plan = (((dry or {}).get("data") or {}).get("plan") or {}).get("plan_id")
    if not check(rec, "the dry run gave a plan id", plan, (dry or {}).get("summary")):
        return
    before = _nvml_used()
    done, _ = p.gpuops("reap", "--min-age", "0", "--idle-window", "3", "--term-wait", "5", "--yes", "--plan", plan,
                       name="reap-yes", timeout=120)
    after = _nvml_used()
    zd = _holder(done, zombie_pid) or {}
    check(rec, "reap --yes signalled the zombie", zd.get("outcome") is not None, "outcome %s" % zd.get("outcome"))
    check(rec, "the zombie is gone", not _alive(zombie_pid))
    freed = (before or 0) - (after or 0)
    rec["notes"].append("NVML memory used: %s MiB before, %s MiB after (freed %.0f MiB)" % (before, after, freed))
    check(rec, "NVML saw at least 3.5 GiB come free", freed >= 3584, "%.0f MiB" % freed)
    gpus = ((done or {}).get("data") or {}).get("gpus") or []
    rec["notes"].append("reap's own account: " + json.dumps([{k: g.get(k) for k in ("index", "memory_used_mib",
                                                             "memory_after_mib", "freed_mib")} for g in gpus]))
    check(rec, "the live job's process still runs", _alive(live_pid))
    st, _ = p.gpuops("status", "--job", "proof-live", name="status-live")
    check(rec, "the live job is still RUNNING", _status_job(st).get("state") == "RUNNING", (st or {}).get("summary"))
    stop, _ = p.gpuops("stop", "--job", "proof-live", "--yes", "--grace", "5", name="stop-live", timeout=60)
    check(rec, "stop --yes ended the live job", not _alive(live_pid), (stop or {}).get("summary"))


def _nvml_used():
    import pynvml

    from gpuops.onbox.host import gpu

    time.sleep(1.0)  # the driver frees a context a moment after its last fd closes
    doc, _ = gpu.from_nvml(pynvml)
    return sum(d.get("memory_used_mib") or 0 for d in (doc or {}).get("devices") or [])


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path("/proc/%d/stat" % pid)
    return stat.exists() and ") Z " not in stat.read_text()


SPIN_STALL_S = 75  # past telemetry's 60 s window, so the window holds only spinning rows


def _gpu0(row):
    return ((row or {}).get("gpus") or [{}])[0]


def step_telemetry(p, rec):
    """A run whose one rank spins on the GPU after its first step (a hung collective's shape), under
    --stall-after: the supervisor's telemetry must read 100 % utilisation at low power, the stall
    kill must keep an nvidia-smi snapshot as evidence, and diagnose must name the busy-wait (U21)."""
    doc, r = p.gpuops("launch", "--name", "proof-spin", "--stall-after", "%ds" % SPIN_STALL_S, "--max-retries", "0",
                      "--cmd", " ".join(_quote(a) for a in [sys.executable, WORKLOADS / "spin.py", 150]),
                      name="launch-spin")
    job = ((doc or {}).get("data") or {}).get("job") or {}
    policy = ((doc or {}).get("data") or {}).get("meta", {}).get("policy") or {}
    check(rec, "launch made a run with the stall policy", job.get("job_id") and policy.get("stall_after_s")
          == SPIN_STALL_S, (doc or {}).get("summary") or r["err"][-300:])
    live, deadline = None, time.monotonic() + 60
    while time.monotonic() < deadline:
        st, _ = p.gpuops("status", "--job", "proof-spin", name="status-spin")
        row = _status_job(st).get("telemetry")
        if (_gpu0(row).get("util") or 0) >= 95:
            live = row
            break
        time.sleep(3)
    g = _gpu0(live)
    check(rec, "status shows a live telemetry row: the spinning GPU at >= 95 % utilisation", live is not None,
          json.dumps(live)[:300])
    if g.get("power") is not None and g.get("power_limit"):
        check(rec, "...at under 40 % of its power limit (no arithmetic)", g["power"] < 0.4 * g["power_limit"],
              "%.0f W of %.0f W" % (g["power"], g["power_limit"]))
    waited = p.wait("proof-spin", SPIN_STALL_S + 90)
    wd = (waited or {}).get("data") or {}
    check(rec, "the run ended by its stall kill", wd.get("state") in ("FAILED", "KILLED") and "stall" in
          json.dumps(wd).lower(), "%s: %s" % (wd.get("state"), (waited or {}).get("summary")))
    jdir = p.work / "jobs" / str(job.get("job_id"))
    evidence = jdir / "stall-1.json"
    ev = json.loads(evidence.read_text()) if evidence.exists() else {}
    gpu_ev = ev.get("gpu") or {}
    check(rec, "the stall evidence holds a GPU snapshot naming the spinning process",
          any(pr.get("pid") for pr in gpu_ev.get("processes") or []), json.dumps(gpu_ev)[:300])
    rows = [json.loads(line) for line in (jdir / "telemetry.jsonl").read_text().splitlines() if line.strip()] \
        if (jdir / "telemetry.jsonl").exists() else []
    check(rec, "telemetry.jsonl holds the series (>= 10 rows)", len(rows) >= 10, "%d rows" % len(rows))
    diag, _ = p.gpuops("diagnose", "--job", "proof-spin", name="diagnose-spin")
    dd = (diag or {}).get("data") or {}
    judged = dd.get("telemetry") or {}
    check(rec, "diagnose names the busy-wait hang from the series (U21)", (judged.get("busy_wait") or {}).get(
        "gotcha") == "U21", json.dumps(judged)[:400])
    train = p.work / "jobs"
    trained = [json.loads(line) for d in train.iterdir() if (d / "meta.json").exists() and "proof-train" in
               (d / "meta.json").read_text() and (d / "telemetry.jsonl").exists()
               for line in (d / "telemetry.jsonl").read_text().splitlines() if line.strip()]
    busy_w = max([_gpu0(x).get("power") or 0 for x in trained] or [0])
    spin_w = max([_gpu0(x).get("power") or 0 for x in rows[-6:]] or [0])
    # A note, not a check: the training step computes for about a second, between 5 s samples.
    rec["notes"].append("power: training's samples peak at %.0f W, spinning %.0f W; %d spin rows; telemetry "
                        "source %s" % (busy_w, spin_w, len(rows), (rows[-1] if rows else {}).get("src")))


STEPS = (
    ("facts", step_facts), ("preflight-nvml", step_preflight_nvml), ("preflight-smi", step_preflight_smi),
    ("nvml-vs-smi", step_nvml_vs_smi),
    ("qualify", lambda p, rec: qualify.step_qualify(p, rec, check, WORKLOADS)), ("train", step_train), ("oom", step_oom), ("reap", step_reap),
    ("telemetry", step_telemetry),
)


def _cleanup(p):
    """Nothing the proof started outlives it: the jobs through gpuops, the zombie by its pid file."""
    for name in ("live.ready", "zombie.ready"):
        pid = _wait_file(p.work / name, 0.01)
        if pid and pid.isdigit() and _alive(int(pid)):
            os.kill(int(pid), signal.SIGKILL)


def main(argv):
    """OUTDIR, then the steps to run (all of them when none is named: a rerun of one failed step
    costs its own minutes of a lent GPU, not the whole proof's)."""
    names = [n for n, _ in STEPS]
    if not argv or argv[0].startswith("-") or any(a not in names for a in argv[1:]):
        print("usage: scripts/gpu-proof OUTDIR [STEP ...]   (steps: %s)" % " ".join(names), file=sys.stderr)
        return 2
    wanted = set(argv[1:] or names)
    why = gpu_missing()
    if why:
        print("gpu-proof: no NVIDIA GPU on this machine: %s" % why, file=sys.stderr)
        return NO_GPU
    p = Proof(argv[0])
    try:
        for name, fn in STEPS:
            if name not in wanted:
                continue
            if p.left_s() < 20:
                p.steps.append({"name": name, "ok": False, "seconds": 0, "checks": [], "rows": [], "notes": [],
                                "error": "not run: the %ds budget was spent" % BUDGET_S})
                continue
            p.step(name, lambda rec, fn=fn: fn(p, rec))
    finally:
        _cleanup(p)
    total = time.monotonic() - p.started
    doc = {"total_s": round(total, 1), "budget_s": BUDGET_S, "steps": p.steps, "machine": report.machine(p.raw),
           "calls": p.calls}
    (p.out / "proof.json").write_text(json.dumps(doc, indent=1, default=str))
    (p.out / "report.md").write_text(report.markdown(doc))
    ok = all(s["ok"] for s in p.steps) and total <= BUDGET_S
    print("gpu-proof: %s in %.0fs; report %s" % ("PASSED" if ok else "FAILED", total, p.out / "report.md"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
