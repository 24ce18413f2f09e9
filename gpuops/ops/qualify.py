"""`preflight --qualify`: measure the box (gpuops.onbox.facts.qualify, one more exec), check every number it
sends, judge it against the datasheet table (gpuops.datasheet) and record the verdict for this
host (gpuops.qualifystore), which `fleet` shows and placement reads."""

from .. import qualifystore
from ..boundary import bounded, shaped
from .. import datasheet as rules
from ..errors import BadAnswer

BUDGET_S = 60
# The box's torch import and CUDA start come on top of the measuring budget.
SLACK_S = 90
ROLES = ("path", "data_dir", "durable_dir", "checkpoint_dir")
MAX_GPUS, MAX_PEERS, MAX_DISKS, MAX_NOTES, MAX_TEXT = 64, 4096, 32, 512, 512
_GPU = {"index": int, "name": (str, type(None)), "matmul_tflops": dict, "memory_gbps": (int, float, type(None)),
        "h2d_gbps": (int, float, type(None)), "d2h_gbps": (int, float, type(None)),
        "link_under_load": (dict, type(None))}
_PEER = {"src": int, "dst": int, "gbps": (int, float), "p2p": (bool, type(None))}
_DISK = {"role": str, "path": str, "bytes": (int, type(None)), "write_mbps": (int, float, type(None)),
         "read_mbps": (int, float, type(None)), "cached": (bool, type(None)), "error": (str, type(None))}
_NOTE = {"what": str, "why": str}


def checked(doc: dict, host: str) -> dict:
    """The measurements once every list, number and text in them is within what gpuops' on-box code writes."""
    def num(value, high, what):
        return bounded(value, 0, high, host, what, "qualify answer")

    def text(value, what):
        if value is not None and len(value) > MAX_TEXT:
            raise BadAnswer(f"{host}: the box's qualify answer is not gpuops's: {what} is {len(value)} characters")

    for items, most, what in ((doc["gpus"], MAX_GPUS, "GPUs"), (doc["peers"], MAX_PEERS, "peers"),
                              (doc["disks"], MAX_DISKS, "disks"), (doc["not_measured"], MAX_NOTES, "notes")):
        num(len(items), most, f"the number of {what}")
    for g in doc["gpus"]:
        shaped(g, _GPU, host, "qualify GPU row")
        num(g["index"], 1023, "a GPU index")
        text(g["name"], "a GPU name")
        num(len(g["matmul_tflops"]), 16, "the matmul dtypes")
        for dtype, tf in g["matmul_tflops"].items():
            text(dtype, "a dtype")
            if not isinstance(tf, (int, float)) or isinstance(tf, bool):
                raise BadAnswer(f"{host}: the box's qualify answer is not gpuops's: matmul {dtype[:40]!r} is {tf!r:.40}")
            num(tf, 1e5, "a matmul TFLOPS")
        for key in ("memory_gbps", "h2d_gbps", "d2h_gbps"):
            num(g[key], 1e6, key)
        link = g["link_under_load"]
        if link is not None:
            shaped(link, {"gen": int, "width": int}, host, "qualify link reading")
            num(link["gen"], 16, "a link generation")
            num(link["width"], 64, "a link width")
    for p in doc["peers"]:
        shaped(p, _PEER, host, "qualify peer row")
        num(p["src"], 1023, "a peer index")
        num(p["dst"], 1023, "a peer index")
        num(p["gbps"], 1e6, "a peer GB/s")
    if doc["allreduce"] is not None:
        ar = shaped(doc["allreduce"], {"gpus": int, "bytes": int, "busbw_gbps": (int, float)}, host, "qualify all-reduce")
        num(ar["gpus"], MAX_GPUS, "all-reduce GPUs")
        num(ar["busbw_gbps"], 1e6, "all-reduce GB/s")
    for d in doc["disks"]:
        shaped(d, _DISK, host, "qualify disk row")
        text(d["path"], "a disk path")
        text(d["error"], "a disk error")
        num(d["write_mbps"], 1e7, "a disk write MB/s")
        num(d["read_mbps"], 1e7, "a disk read MB/s")
    for n in doc["not_measured"]:
        shaped(n, _NOTE, host, "qualify note")
        text(n["what"], "a note")
        text(n["why"], "a note")
    return doc


def disk_args(facts) -> list:
    """--path ROLE=DIR for each directory the run named that exists; none means the box's home."""
    args = []
    for d in facts.get("disks") or []:
        if d.get("role") in ROLES and d.get("exists") and d.get("path"):
            args += ["--path", f"{d['role']}={d['path']}"]
    return args


def qualify(target, facts, host: str, budget_s=BUDGET_S):
    """(data, findings): the measurements, the rows against the datasheet and the verdict, which is
    recorded for `host`."""
    args = disk_args(facts) + ["--budget", str(budget_s)]
    measured = checked(target.run_onbox("qualify", args, timeout_s=budget_s + SLACK_S), host)
    judged, findings = rules.judge(measured, facts)
    models = [d.get("name") for d in ((facts.get("gpu") or {}).get("devices") or []) if d.get("name")]
    qualifystore.record(host, judged, models)
    judged["measured"] = measured
    return judged, findings
