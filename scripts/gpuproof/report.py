"""The proof's report as Markdown, from the document run.py writes (proof.json). Pure but for
`machine`, which reads two raw files the run kept."""

import json

from . import compare


def machine(raw_dir):
    """{gpus, torch...}: what the report's head says of the machine."""
    out = {}
    try:
        out["gpus"] = [line for line in (raw_dir / "nvidia-smi-L.out").read_text().splitlines() if line.strip()]
    except OSError:
        out["gpus"] = []
    try:
        out.update(json.loads((raw_dir / "torch-cuda.out").read_text()))
    except (OSError, ValueError):
        pass
    try:
        version = (raw_dir / "nvidia-smi-version.out").read_text()
        out["nvidia_smi"] = " / ".join(line.strip() for line in version.splitlines() if line.strip())
    except OSError:
        pass
    return out


def _cell(value):
    if value is None:
        return "–"
    if isinstance(value, dict):
        value = "%s: %s" % (value.get("severity"), value.get("title"))
    elif isinstance(value, float):
        value = ("%.2f" % value).rstrip("0").rstrip(".")
    elif isinstance(value, int) and not isinstance(value, bool) and value > 255:
        value = str(value)
    text = str(value).replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= 90 else text[:87] + "..."


def _mark(ok):
    return "✓" if ok else "✗"


def _step_status(step):
    if step.get("skipped"):
        return "skipped"
    return "passed" if step["ok"] else "FAILED"


def markdown(doc):
    steps = doc["steps"]
    ok = all(s["ok"] for s in steps) and doc["total_s"] <= doc["budget_s"]
    m = doc.get("machine") or {}
    lines = ["# gpuops real-GPU proof", "",
             "**%s** in %.0f s (budget %.0f s)." % ("PASSED" if ok else "FAILED", doc["total_s"], doc["budget_s"]), ""]
    for gpu in m.get("gpus") or []:
        lines.append("- " + gpu)
    if m.get("torch"):
        lines.append("- torch %s (CUDA %s), Python %s, nvidia-ml-py %s" % (
            m.get("torch"), m.get("torch_cuda"), m.get("python"), m.get("pynvml")))
    if m.get("nvidia_smi"):
        lines.append("- " + m["nvidia_smi"])
    lines += ["", "| step | result | seconds | checks | field mismatches |", "|---|---|---|---|---|"]
    for s in steps:
        passed = sum(1 for c in s["checks"] if c["ok"])
        lines.append("| %s | %s | %.1f | %d/%d | %d of %d |" % (
            s["name"], _step_status(s), s["seconds"], passed, len(s["checks"]), len(compare.failures(s["rows"])),
            sum(1 for r in s["rows"] if r["verdict"] not in (compare.SHOWN,))))
    for s in steps:
        lines += ["", "## %s: %s (%.1f s)" % (s["name"], _step_status(s), s["seconds"]), ""]
        for note in s["notes"]:
            lines.append("- " + note)
        if s["notes"]:
            lines.append("")
        for c in s["checks"]:
            lines.append("- %s %s%s" % (_mark(c["ok"]), c["what"], "" if c.get("detail") in (None, "") else
                                        ": `%s`" % _cell(c["detail"]).replace("`", "'")))
        if s.get("error"):
            lines += ["", "```text", s["error"].rstrip(), "```"]
        if s["rows"]:
            lines += ["", "| scope | field | gpuops | reference | rule | verdict |", "|---|---|---|---|---|---|"]
            for r in s["rows"]:
                lines.append("| %s | %s | %s | %s | %s | %s |" % tuple(
                    _cell(r[k]) for k in ("scope", "field", "gpuops", "reference", "rule", "verdict")))
    return "\n".join(lines) + "\n"
