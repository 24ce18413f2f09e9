"""Keep or return the box: `preflight --qualify`'s measurements (gpuops.onbox.facts.qualify) against what each
GPU model's datasheet says it should do (references/gpus.toml), pure.

Each figure becomes a row {what, gpu, measured, reference, unit, ratio, floor, verdict, source}: its
reference is the model's datasheet figure (host copies: the PCIe link the card is built for; peers
and all-reduce: its NVLink where the box's NVLink is up, else that PCIe link; disks: the table's
floors), and it is kept at or above `floor` times the reference. One row below its floor returns
the box; nothing compared leaves it unjudged ("unmeasured"), never kept on no evidence.
"""

import functools
import re
from pathlib import Path

from .findings import Finding
from .checks.link import best_gen, pcie_gbps

TABLE = Path(__file__).resolve().parent / "data" / "references" / "gpus.toml"
KEEP, RETURN, UNMEASURED = "keep", "return", "unmeasured"
RERENT = "gpuops preflight --qualify --json   # the rows below their floor are the evidence: return the box, re-rent"


@functools.lru_cache(maxsize=None)
def references(path: str = str(TABLE)) -> dict:
    """{"floors", "disk", "models": {name: row}} from the reference table."""
    from . import tomlschema

    data, _ = tomlschema.parse(path, Path(path).read_text(encoding="utf-8"))
    return data


def model_for(name: str, table=None):
    """(model key, its row) of the first model whose `match` finds GPU `name`, else (None, None)."""
    for key, row in ((table or references())["models"]).items():
        if name and re.search(row["match"], name, re.I):
            return key, row
    return None, None


def _row(kind, what, gpu, measured, reference, unit, floor, source) -> dict:
    ratio = round(measured / reference, 2) if reference else None
    return {"kind": kind, "what": what, "gpu": gpu, "measured": measured, "reference": reference, "unit": unit, "ratio": ratio,
            "floor": floor, "verdict": KEEP if ratio is not None and ratio >= floor else RETURN, "source": source}


def _nvlink_up(facts):
    return any((v or {}).get("active") for v in ((facts.get("links") or {}).get("nvlink") or {}).values())


def gpu_rows(measured, facts, table):
    floors = table["floors"]
    rows, unknown = [], []
    names = {d.get("index"): d.get("name") for d in ((facts.get("gpu") or {}).get("devices") or [])}
    models = {}
    for g in measured["gpus"]:
        key, ref = model_for(names.get(g["index"]) or g.get("name"), table)
        if ref is None:
            unknown.append(g.get("name") or names.get(g["index"]) or "GPU %s" % g["index"])
            continue
        models[g["index"]] = (key, ref)
        src = f"{key}: {ref['source']}"
        for dtype, tf in sorted((g.get("matmul_tflops") or {}).items()):
            if dtype in ref["matmul_tflops"]:
                rows.append(_row("matmul", f"matmul {dtype}", g["index"], tf, ref["matmul_tflops"][dtype], "TFLOPS",
                                 floors["matmul"], src))
        if g.get("memory_gbps") is not None:
            rows.append(_row("memory", "memory bandwidth", g["index"], g["memory_gbps"], ref["memory_gbps"], "GB/s",
                             floors["memory"], src))
        link = pcie_gbps(ref["pcie_gen"], ref["pcie_width"])
        for kind, what, field in (("h2d", "host to device", "h2d_gbps"), ("d2h", "device to host", "d2h_gbps")):
            if g.get(field) is not None:
                rows.append(_row(kind, what, g["index"], g[field], link, "GB/s", floors["host_copy"],
                                 f"{src}; PCIe gen {ref['pcie_gen']} x{ref['pcie_width']} per direction"))
    nvlink = _nvlink_up(facts)

    def between(index):
        key, ref = models.get(index, (None, None))
        if ref is None:
            return None, None
        if nvlink and ref.get("nvlink_gbps"):
            return ref["nvlink_gbps"], f"{key}: NVLink per direction; {ref['source']}"
        return pcie_gbps(ref["pcie_gen"], ref["pcie_width"]), f"{key}: PCIe gen {ref['pcie_gen']} x{ref['pcie_width']}"

    for p in measured["peers"]:
        reference, src = between(p["src"])
        if reference:
            row = _row("peer", f"peer GPU {p['src']} -> GPU {p['dst']}", p["src"], p["gbps"], reference, "GB/s",
                       floors["peer"], src)
            row["p2p"] = p.get("p2p")
            rows.append(row)
    ar = measured.get("allreduce")
    if ar and ar.get("busbw_gbps") is not None:
        reference, src = between(0)
        if reference:
            rows.append(_row("allreduce", f"all-reduce bus bandwidth, {ar['gpus']} GPUs", None, ar["busbw_gbps"], reference,
                             "GB/s", floors["allreduce"], src))
    return rows, unknown


def disk_rows(measured, table):
    floors = table["disk"]
    rows = []
    for d in measured["disks"]:
        for what, field, floor in (("write", "write_mbps", floors["write_mbps"]), ("read", "read_mbps", floors["read_mbps"])):
            if d.get(field) is not None:
                row = _row("disk", f"{d['role']} {what} ({d['path']})", None, d[field], floor, "MB/s", 1.0, floors["source"])
                row["cached"] = d.get("cached")
                rows.append(row)
    return rows


def link_rows(measured, facts):
    """The link as nvidia-smi read it while host copies ran, against the most this GPU and slot allow."""
    out = []
    by_index = {d.get("index"): d for d in ((facts.get("links") or {}).get("devices") or [])}
    for g in measured["gpus"]:
        now, d = g.get("link_under_load"), by_index.get(g["index"])
        if not now or not d or not d.get("width_max") or not best_gen(d):
            continue
        short = now["width"] < d["width_max"] or now["gen"] < best_gen(d)
        out.append({"kind": "pcie", "what": "PCIe link under load", "gpu": g["index"], "measured": f"x{now['width']} gen {now['gen']}",
                    "reference": f"x{d['width_max']} gen {best_gen(d)}", "unit": "", "ratio": None, "floor": None,
                    "verdict": RETURN if short else KEEP, "source": "nvidia-smi pcie.link.*.max on this box"})
    return out


def title(r) -> str:
    """'GPU 1 host to device: 3.1 of 63 GB/s (5%, floor 45%)'."""
    label = f"GPU {r['gpu']} " if r["gpu"] is not None else ""
    if r["ratio"] is None:
        return f"{label}{r['what']}: {r['measured']} of {r['reference']}"
    return (f"{label}{r['what']}: {r['measured']:g} of {r['reference']:g} {r['unit']} "
            f"({r['ratio']:.0%}, floor {r['floor']:.0%})")


def verdict_finding(verdict, rows, failed):
    kept = len(rows) - len(failed)
    evidence = {"verdict": verdict, "kept": kept, "below_floor": len(failed)}
    if verdict == RETURN:
        return Finding("qualify.verdict", "fail", f"qualify: RETURN the box: {len(failed)} of {len(rows)} "
                       "measurement(s) below their datasheet floor", evidence, RERENT)
    if verdict == KEEP:
        return Finding("qualify.verdict", "ok", f"qualify: KEEP: {kept} measurement(s) at or above their datasheet "
                       "floor", evidence)
    return Finding("qualify.verdict", "info", f"qualify: no GPU figure judged ({kept} disk measurement(s) kept): "
                   "neither keep nor return", evidence,
                   "gpuops preflight --qualify --json   # not_measured says why: torch with CUDA in the box's python3, or a "
                   "references/gpus.toml row for this GPU")


def judge(measured, facts, table=None):
    """{"verdict", "rows", "unknown_models", "not_measured"} and the findings that say it."""
    table = table or references()
    rows, unknown = gpu_rows(measured, facts, table)
    rows += link_rows(measured, facts) + disk_rows(measured, table)
    failed = [r for r in rows if r["verdict"] == RETURN]
    gpu_judged = any(r["kind"] not in ("disk", "pcie") for r in rows)
    verdict = RETURN if failed else KEEP if gpu_judged else UNMEASURED
    findings = [verdict_finding(verdict, rows, failed)]
    for r in failed:
        findings.append(Finding("qualify." + r["kind"], "fail", title(r),
                                {k: r[k] for k in ("gpu", "measured", "reference", "ratio", "floor", "source")}, RERENT))
    for name in unknown:
        findings.append(Finding("qualify.model", "info", f"no datasheet row for {name}: its figures were not judged",
                                {"gpu": name}, "add a table for it to references/gpus.toml"))
    for item in measured["not_measured"]:
        findings.append(Finding("qualify.unmeasured", "info", f"not measured: {item['what']}", {"why": item["why"]}))
    return {"verdict": verdict, "rows": rows, "unknown_models": unknown,
            "not_measured": measured["not_measured"]}, findings
