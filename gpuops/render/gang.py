"""Gangs and placements for people: the preflight's findings and torch table, where a job was
placed and why the other boxes were not, the gang's nodes, its stop plan and its logs' cursors."""

import sys

from . import print_findings, state_text, summary_line


def launched(doc, con) -> None:
    """A launch: a placement's reasons, a gang's preflight (findings, the torch table when the
    nodes disagree, the pairs that cannot connect), then the summary line."""
    from rich.table import Table
    from rich.text import Text

    d = doc["data"]
    placed = d.get("placement")
    if placed:
        for box in placed["boxes"]:
            con.print(f"  {box['host']}: {box['verdict']}" + (f" ({box['why']})" if box.get("why") else ""),
                      markup=False, soft_wrap=True)
    pre = d.get("preflight")
    if pre:
        print_findings(doc.get("findings") or [], con)
        if any(f["id"] == "gang.torch-mismatch" for f in doc.get("findings") or []):
            table = Table(title="what each node would run", expand=False)
            for col in ("node", "host", "torch", "torch CUDA", "driver", "driver CUDA", "python", "GPUs"):
                table.add_column(col)
            for r in pre["table"]:
                table.add_row(str(r["node"]), *(Text(str(r.get(k) or "-")) for k in (
                    "host", "torch", "torch_cuda", "driver", "cuda_max", "python", "gpus")))
            con.print(table)
        failed = [p for p in pre.get("dataplane") or [] if not p["ok"]]
        if failed:
            table = Table(title="data plane: pairs of nodes that cannot connect (NCCL/Gloo ports)", expand=False)
            for col in ("from", "to", "listener", "error"):
                table.add_column(col)
            for p in failed:
                table.add_row(f"node {p['from']}", f"node {p['to']}", f"{p['address']}:{p['port']}", p["error"] or "-")
            con.print(table)
        for node in (d.get("gang") or {}).get("nodes") or []:
            con.print(f"  node {node['index']} {node['host']}: job {node['job_id'] or '-'} (pid {node['pid'] or '-'}), "
                      f"interface {node['interface']} {node['address']}", markup=False, soft_wrap=True)
    summary_line(doc, con)


def status(doc, con) -> None:
    from rich.table import Table
    from rich.text import Text

    d = doc["data"]
    table = Table(title=Text(f"gang {d['gang_id']}: {d['state']}"), expand=False)
    for col in ("node", "host", "job", "state", "pid", "last progress"):
        table.add_column(col, no_wrap=col != "last progress")
    for n in d["nodes"]:
        table.add_row(str(n["index"]), Text(n["host"]), Text(n["job_id"] or "-"), state_text(n),
                      str(n.get("pid") or "-"), Text((n.get("last_progress") or "-")[:60]))
    con.print(table)
    for n in d["nodes"]:
        if n.get("reason"):
            con.print(f"  node {n['index']}: {n['reason']}", markup=False, soft_wrap=True)
    summary_line(doc, con)


def stop(doc, con) -> None:
    for n in doc["data"].get("nodes") or []:
        for t in n.get("targets") or []:
            con.print(f"  node {n['index']} {n['host']}: pid {t['pid']}{' [GPU]' if t.get('gpu') else ''}: "
                      f"{t.get('cmd') or ''}", markup=False, soft_wrap=True)
    summary_line(doc, con)


def logs_trailer(doc, con=None, stream=None) -> None:
    """After the node-prefixed lines: one line on stderr with the outcome and each node's cursor."""
    stream = stream or sys.stderr
    stream.write(f"gpuops: {doc['summary']}\n")
