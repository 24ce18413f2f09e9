"""The proof's qualify step: `gpuops preflight --qualify --json` on the real GPU, its figures against the
GPU's datasheet (gpuops' own rows, shown in the report), against a second measurement timed another
way (workloads/measure.py: CUDA events), and the link facts preflight read against nvidia-smi's own
XML. Pure but for `step_qualify`, which runs the commands."""

import json
import sys

from . import compare

# gpuops' figure and the second opinion must agree within this share: two timings of the same work.
AGREE = 0.25
SECOND_OPINION = (("bfloat16 matmul TFLOPS", ("matmul_tflops", "bfloat16"), "bf16_tflops"),
                  ("host to device GB/s", ("h2d_gbps",), "h2d_gbps"),
                  ("memory bandwidth GB/s", ("memory_gbps",), "memory_gbps"))


def datasheet_rows(qualify):
    """The report's rows for gpuops' own comparison with the datasheet: a row kept is a match, a row
    below its floor a mismatch (a healthy lent GPU should keep); the disks' rows, against a rule of
    thumb and not a datasheet, are shown."""
    out = []
    for r in qualify.get("rows") or []:
        rule = "ratio %s, floor %s" % (r.get("ratio"), r.get("floor")) if r.get("floor") is not None else "at most"
        out.append({"scope": "GPU %s" % r["gpu"] if r.get("gpu") is not None else "box", "field": r["what"],
                    "gpuops": r["measured"], "reference": r["reference"], "rule": rule,
                    "verdict": compare.SHOWN if r.get("kind") == "disk" else
                    compare.MATCH if r["verdict"] == "keep" else compare.MISMATCH})
    return out


def _value(gpu, path):
    for key in path:
        gpu = (gpu or {}).get(key)
    return gpu


def opinion_rows(measured, second):
    """gpuops' GPU 0 figures against the second opinion's, within AGREE."""
    gpu = (measured.get("gpus") or [{}])[0]
    out = []
    for label, path, key in SECOND_OPINION:
        ours, theirs = _value(gpu, path), second.get(key)
        agree = ours is not None and theirs and abs(ours - theirs) <= AGREE * theirs
        out.append({"scope": "GPU 0", "field": label, "gpuops": ours, "reference": round(theirs, 1) if theirs else None,
                    "rule": "within %d%% of CUDA events" % (AGREE * 100),
                    "verdict": compare.MATCH if agree else compare.MISMATCH})
    return out


def link_rows(links, xml_text):
    """preflight's PCIe link facts of each GPU against `nvidia-smi -q -x`'s pci_gpu_link_info."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as e:
        return [{"scope": "box", "field": "nvidia-smi -q -x", "gpuops": None, "reference": "not XML: %s" % e,
                 "rule": "exact", "verdict": compare.MISMATCH}]
    out = []
    for d, gpu in zip(links.get("devices") or [], root.findall("gpu")):
        info = gpu.find("pci/pci_gpu_link_info")
        if info is None:
            continue
        ref = {"gen_max": info.findtext("pcie_gen/max_link_gen"), "gen_gpumax": info.findtext("pcie_gen/max_device_link_gen"),
               "width_max": (info.findtext("link_widths/max_link_width") or "").rstrip("x")}
        for key, want in ref.items():
            want = int(want) if want and want.isdigit() else None
            out.append({"scope": "GPU %s" % d.get("index"), "field": key, "gpuops": d.get(key), "reference": want,
                        "rule": "exact", "verdict": compare.MATCH if d.get(key) == want else
                        (compare.UNCONFIRMED if want is None else compare.MISMATCH)})
    return out


def step_qualify(p, rec, check, workloads):
    doc, r = p.gpuops("preflight", "--qualify", name="preflight-qualify", timeout=240)
    if not check(rec, "preflight --qualify printed an envelope", doc is not None, r["err"][-300:] or None):
        return
    data = doc.get("data") or {}
    q = data.get("qualify") or {}
    measured = q.get("measured") or {}
    rec["notes"].append("preflight --qualify: %s (exit %s, %.1fs; on the box %ss)" % (
        doc.get("summary"), r["rc"], r["seconds"], measured.get("seconds")))
    rec["notes"].append("torch on the box: %s" % json.dumps(measured.get("torch")))
    check(rec, "every GPU figure was measured", not measured.get("not_measured"),
          json.dumps(measured.get("not_measured"))[:300])
    check(rec, "the link was read under load", all(g.get("link_under_load") for g in measured.get("gpus") or [{}]),
          json.dumps([g.get("link_under_load") for g in measured.get("gpus") or []]))
    # The GPU's figures against its datasheet are what this proves; the box's disk is the box's.
    gpu_rows = [r for r in q.get("rows") or [] if r.get("kind") not in ("disk",)]
    check(rec, "every GPU figure is at or above its datasheet floor", gpu_rows and all(
        r["verdict"] == "keep" for r in gpu_rows), [r["what"] for r in gpu_rows if r["verdict"] != "keep"])
    rec["notes"].append("qualify verdict: %s (disk rows: %s)" % (q.get("verdict"), json.dumps(
        [[r["what"], r["measured"], r["verdict"]] for r in q.get("rows") or [] if r.get("kind") == "disk"])))
    links = data.get("links") or {}
    check(rec, "preflight read every GPU's link", len(links.get("devices") or []) == len(measured.get("gpus") or []),
          json.dumps(links)[:400])
    rec["notes"].append("links: p2p %s, nvlink %s, allowed CPUs %s, NUMA nodes %s" % (
        json.dumps(links.get("p2p_read")), json.dumps(links.get("nvlink")), links.get("allowed_cpus"),
        links.get("numa_nodes")))
    rec["rows"] += datasheet_rows(q)
    second = p.sh([sys.executable, str(workloads / "measure.py")], name="measure-events", timeout=120)
    try:
        opinion = json.loads(second["out"].strip().splitlines()[-1])
    except (ValueError, IndexError):
        opinion = None
    if check(rec, "the second opinion (CUDA events) ran", opinion is not None, second["err"][-300:] or None):
        rec["rows"] += opinion_rows(measured, opinion)
    xml = p.sh(["nvidia-smi", "-q", "-x"], name="nvidia-smi-q-x-qualify", timeout=30)
    rec["rows"] += link_rows(links, xml["out"])
    topo = p.sh(["nvidia-smi", "topo", "-p2p", "r"], name="nvidia-smi-topo-p2p-r", timeout=30)
    from gpuops.onbox.host import gpulinks

    csv = p.sh(gpulinks.query(gpulinks.NEW_FIELDS), name="csv-links", timeout=30)  # the fakes' fixture
    check(rec, "the link CSV query is accepted", csv["rc"] == 0, (csv["err"] or csv["out"]).strip()[:300])

    check(rec, "preflight's P2P matrix is what topo -p2p r prints", gpulinks.parse_p2p(topo["out"]) ==
          links.get("p2p_read"), topo["out"][:300])
