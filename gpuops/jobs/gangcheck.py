"""A gang's preflight, judged: every node's facts (gpuops.onbox.gang.gang_facts) -> findings, the torch
table, and the rendezvous plan a launch uses. Pure: the facts come in, nothing is asked here.

Refused (a fail finding) before anything starts: a node that could not be asked; two hosts that
are one box (the same host key); torch missing, or versions or CUDA builds that differ; a driver
too old for torch's CUDA; more processes per node than GPUs; code that differs from the head's;
the rendezvous port busy on the head (with its holder); a node that cannot reach the head's port,
or reached something else there; an interface other hosts cannot reach; a pair of nodes that cannot
connect on the ephemeral ports NCCL and Gloo use after the rendezvous (gpuops.jobs.gangplane); clocks
apart by more than CLOCK_TOLERANCE_S. Warned: drivers, Python versions or GPU models that differ.
"""

import ipaddress

from ..boundary import bounded, shaped
from .. import shapes
from ..errors import BadAnswer, HostKeyShared
from ..findings import Finding, any_failed, worst_first
from . import gangplane, torchrun

# The gang's verbs order its nodes' events by each box's clock (which node failed first); a
# skew past this could blame the wrong node.
CLOCK_TOLERANCE_S = 5.0
SHOWN_PATHS = 10

NUMBER, NONE = (int, float), type(None)
_IFACE = {"name": str, "ipv4": (str, NONE), "up": bool, "loopback": bool, "mtu": (int, NONE)}
_ROUTE = {"address": (str, NONE), "interface": (str, NONE)}
_HEAD = {"role": str, "port": int, "free": bool, "error": (str, NONE), "holders": list, "heard": list,
         "strangers": int, "interface": (str, NONE)}
_HOLDER = {"pid": int, "comm": (str, NONE), "cmd": (str, NONE)}
_HEARD = {"node": int, "from": str, "at": str}
_WORKER = {"role": str, "connected": bool, "answered": bool, "error": (str, NONE), "seconds": NUMBER + (NONE,),
           "local": (str, NONE), "attempts": int, "interface": (str, NONE)}
_CODE = {"dir": str, "exists": bool, "files": int, "bytes": int, "digest": str, "entries": list, "truncated": bool,
         "errors": int}
_GPU = {"driver": (str, NONE), "cuda_max": (str, NONE), "error": (str, NONE), "count": int, "names": list}
_TORCH = {"installed": bool, "version": (str, NONE), "cuda": (str, NONE), "error": (str, NONE), "nccl": (str, NONE)}
MAX_TEXT, MAX_LIST = 512, 4096


def _address(value, host: str, what):
    if value is not None:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            raise BadAnswer(f"{host}: the box's gang answer is not gpuops's: {what} {value!r}") from None
    return value


def _texts(host: str, *values) -> None:
    for value in values:
        bounded(len(value or ""), 0, MAX_TEXT, host, "a text's length", "gang answer")


def checked(doc, host: str):
    """The gang_facts answer once its shape, sizes and addresses are what gpuops writes."""
    shapes.checked("gang_facts", doc, host)
    for key, fields in (("route", _ROUTE), ("gpu", _GPU), ("torch", _TORCH)):
        shaped(doc[key], fields, host, f"gang answer's {key}")
    bounded(len(doc["interfaces"]), 0, 64, host, "the number of interfaces", "gang answer")
    for entry in doc["interfaces"]:
        shaped(entry, _IFACE, host, "gang answer's interface")
        _address(entry["ipv4"], host, "interface address")
        _texts(host, entry["name"])
        bounded(entry["mtu"], 0, 1 << 20, host, "an interface's MTU", "gang answer")
    rdzv = shaped(doc["rendezvous"], _HEAD if doc["rendezvous"].get("role") == "head" else _WORKER, host,
                  "gang answer's rendezvous")
    for holder in rdzv.get("holders") or []:
        shaped(holder, _HOLDER, host, "gang answer's port holder")
        _texts(host, holder["comm"], holder["cmd"])
    bounded(len(rdzv.get("heard") or []), 0, MAX_LIST, host, "the workers heard", "gang answer")
    for heard in rdzv.get("heard") or []:
        shaped(heard, _HEARD, host, "gang answer's hello")
        _address(heard["from"], host, "peer address")
        _address(heard["at"], host, "head address")
    _address(rdzv.get("local"), host, "local address")
    gangplane.checked(doc["dataplane"], host)
    _address(doc["route"]["address"], host, "route source")
    if doc["code"] is not None:
        code = shaped(doc["code"], _CODE, host, "gang answer's code")
        bounded(len(code["entries"]), 0, MAX_LIST, host, "the code entries", "gang answer")
        for entry in code["entries"]:
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                    and isinstance(entry[1], (str, NONE))):
                raise BadAnswer(f"{host}: the box's gang answer is not gpuops's: a code entry is {entry!r:.80}")
    bounded(len(doc["gpu"]["names"]), 0, 64, host, "the number of GPUs", "gang answer")
    _texts(host, doc["hostname"], doc["python"], doc["boot_id"], doc["netns"], doc["gpu"]["driver"],
           doc["gpu"]["cuda_max"], doc["gpu"]["error"], doc["torch"]["version"], doc["torch"]["cuda"],
           doc["torch"]["error"], doc["torch"]["nccl"], rdzv.get("error"), rdzv.get("interface"), doc["route"]["interface"],
           *[n for n in doc["gpu"]["names"] if isinstance(n, str)])
    bounded(doc["now"], 0, 1e11, host, "now", "gang answer")
    return doc


def _version(text):
    try:
        return tuple(int(p) for p in str(text).split(".")[:2])
    except ValueError:
        return None


def table(nodes):
    """One row per node: what it would run."""
    rows = []
    for n in nodes:
        f = n.get("facts")
        if f is None:
            rows.append({"node": n["index"], "host": n["host"], "error": n["error"]["message"]})
            continue
        torch = f["torch"]
        rows.append({"node": n["index"], "host": n["host"],
                     "torch": torch.get("version") or ("import failed" if torch.get("error") else "not installed"),
                     "torch_cuda": torch.get("cuda"), "nccl": torch.get("nccl"), "driver": f["gpu"]["driver"], "cuda_max": f["gpu"]["cuda_max"],
                     "python": f["python"], "gpus": f["gpu"]["count"],
                     "gpu_model": f["gpu"]["names"][0] if f["gpu"]["names"] else None})
    return rows


def _who(n) -> str:
    return f"node {n['index']} ({n['host']})"


def _differ(rows, key):
    return len({r.get(key) for r in rows}) > 1


def _software(nodes, rows, nproc):
    out = []
    missing = [n for n in nodes if not n["facts"]["torch"].get("version")]
    for n in missing:
        torch = n["facts"]["torch"]
        out.append(Finding("gang.torch-missing", "fail", f"{_who(n)}: python3 cannot import torch",
                           {"host": n["host"], "error": torch.get("error") or "not installed"},
                           "install the same torch on every node (pip install torch==VERSION)"))
    if not missing and (_differ(rows, "torch") or _differ(rows, "torch_cuda")):
        out.append(Finding("gang.torch-mismatch", "fail", "the nodes run different torch builds: " + ", ".join(
            f"{r['host']} {r['torch']} (CUDA {r['torch_cuda'] or 'none'})" for r in rows),
            {"table": rows}, "install one torch build on every node, then launch again"))
    elif not missing and _differ(rows, "nccl"):
        # One torch, yet another NCCL: an LD_LIBRARY_PATH or nvidia-nccl wheel of its own on a node.
        out.append(Finding("gang.nccl-mismatch", "fail", "the nodes load different NCCL versions: " + ", ".join(
            f"{r['host']} {r['nccl'] or 'none'}" for r in rows), {"table": rows},
            "python3 -c 'import torch; print(torch.cuda.nccl.version())'   # on each node: one NCCL everywhere "
            "(unset LD_LIBRARY_PATH or pip install the same nvidia-nccl-cu* wheel)"))
    for n, r in zip(nodes, rows):
        need, have = _version(r.get("torch_cuda")), _version(r.get("cuda_max"))
        if need and have and need > have:
            out.append(Finding("gang.driver-too-old", "fail",
                               f"{_who(n)}: its driver {r['driver']} supports CUDA {r['cuda_max']}, torch needs "
                               f"{r['torch_cuda']}", {"host": n["host"], "driver": r["driver"]},
                               "a torch build for the driver's CUDA, or a newer driver", "U28"))
        if r["gpus"] and nproc > r["gpus"]:
            out.append(Finding("gang.gpus", "fail", f"{_who(n)}: {nproc} processes per node but {r['gpus']} GPU(s)",
                               {"host": n["host"], "gpus": r["gpus"], "nproc_per_node": nproc},
                               f"--nproc-per-node {r['gpus']}"))
    for key, what in (("driver", "drivers"), ("python", "Python versions"), ("gpu_model", "GPU models")):
        if _differ(rows, key):
            out.append(Finding(f"gang.{key.replace('_', '-')}-mismatch", "warn", f"the nodes have different {what}: "
                               + ", ".join(f"{r['host']} {r.get(key)}" for r in rows), {"table": rows}))
    return out


def _code(nodes, head):
    if head["facts"]["code"] is None:
        return []
    out, want = [], head["facts"]["code"]
    for n in nodes:
        have = n["facts"]["code"]
        if not have["exists"]:
            out.append(Finding("gang.code-missing", "fail", f"{_who(n)}: {have['dir']} does not exist",
                               {"host": n["host"], "dir": have["dir"]}, "push the code to every node first"))
        elif have["digest"] != want["digest"] and n is not head:
            ours, theirs = dict(want["entries"]), dict(have["entries"])
            paths = sorted(p for p in set(ours) | set(theirs) if ours.get(p) != theirs.get(p))
            shown = paths[:SHOWN_PATHS] if not (want["truncated"] or have["truncated"]) else []
            out.append(Finding("gang.code-differs", "fail",
                               f"{_who(n)}: {have['dir']} differs from the head's ({have['files']} files against "
                               f"{want['files']})" + (": " + ", ".join(shown) if shown else ""),
                               {"host": n["host"], "paths": shown, "differing": len(paths)},
                               "push the same tree to every node (gpuops push), then launch again", "U42"))
    return out


def _port(head, rdzv_host, port: int):
    r = head["facts"]["rendezvous"]
    if r["free"]:
        return []
    held = ", ".join(f"pid {h['pid']} ({h.get('comm') or '?'})" for h in r["holders"]) or "a process gpuops cannot see"
    pids = " ".join(str(h["pid"]) for h in r["holders"])
    return [Finding("gang.port-busy", "fail", f"port {port} is busy on the head {head['host']}: held by {held}",
                    {"host": head["host"], "port": port, "error": r["error"], "holders": r["holders"]},
                    (f"kill {pids}   # a leftover torchrun? or " if pids else "") + f"--rdzv-port {port + 1}")]


def _candidates(head):
    """The head's addresses other hosts could reach it at ('10.0.0.5 (ens5)'), for a fix line."""
    return ", ".join(f"{i['ipv4']} ({i['name']})" for i in head["facts"]["interfaces"]
                     if i["up"] and i["ipv4"] and not torchrun.interface_problem(i["name"]))


def _reach(nodes, head, rdzv_host, port: int):
    out: list = []
    if not head["facts"]["rendezvous"]["free"]:
        return out  # nothing listened: the busy port is the finding
    known = _candidates(head)
    where = f" (the head has {known})" if known else ""
    for n in nodes:
        r = n["facts"]["rendezvous"]
        if n is head:
            continue
        if not r["connected"]:
            out.append(Finding("gang.unreachable-rendezvous", "fail",
                               f"{_who(n)} cannot reach {rdzv_host}:{port} on the head: {r['error']} "
                               f"({r['attempts']} tries)", {"host": n["host"], "error": r["error"]},
                               "open the port between the boxes, or give an address of the head they can reach: "
                               f"--rdzv-host ADDR{where}", "VAST6"))
        elif not r["answered"]:
            out.append(Finding("gang.wrong-head", "fail", f"{_who(n)} reached {rdzv_host}:{port}, but not the head "
                               f"{head['host']}: {r['error']}", {"host": n["host"]},
                               f"--rdzv-host with an address of the head itself{where}"))
    return out


def _interfaces(nodes, head, multi_host):
    """(findings, {index: (interface, address)}) for every node."""
    out, chosen = [], {}
    for n in nodes:
        f = n["facts"]
        r = f["rendezvous"]
        if n is head:
            address = next((h["at"] for h in r["heard"]), None) or f["route"]["address"]
        else:
            address = r["local"] or f["route"]["address"]
        name = r["interface"] or f["route"]["interface"]
        chosen[n["index"]] = (name, address)
        problem = torchrun.interface_problem(name, multi_host) if name else "no interface routes to the rendezvous"
        if problem:
            out.append(Finding("gang.interface", "fail", f"{_who(n)}: its gang traffic would leave through "
                               f"{name or 'nothing'}: {problem}", {"host": n["host"], "interface": name,
                                                                   "address": address},
                               "--rdzv-host with the head's address on the network the boxes share"))
    return out + _mtus(nodes, chosen), chosen


def _mtus(nodes, chosen):
    """The MTU of each node's gang interface: ends that differ lose jumbo frames between them."""
    mtus = {}
    for n in nodes:
        name = chosen[n["index"]][0]
        entry = next((i for i in n["facts"]["interfaces"] if i["name"] == name), None)
        if entry and entry.get("mtu"):
            mtus[n["host"]] = (name, entry["mtu"])
    if len({m for _, m in mtus.values()}) <= 1:
        return []
    low = min(m for _, m in mtus.values())
    return [Finding("gang.mtu", "warn", "the nodes' gang interfaces have different MTUs: " + ", ".join(
        f"{h} {name} {m}" for h, (name, m) in mtus.items()) + ": frames larger than the smaller end's are dropped",
        {"mtu": {h: m for h, (_, m) in mtus.items()}},
        f"ip link set dev IFACE mtu {low}   # on the nodes above {low} (root), or ask the provider for one MTU")]


def _clocks(nodes):
    skews = {n["host"]: n["facts"]["now"] - n["received_at"] for n in nodes}
    spread = max(skews.values()) - min(skews.values())
    if spread <= CLOCK_TOLERANCE_S:
        return []
    return [Finding("gang.clock", "fail", f"the nodes' clocks are {spread:.1f}s apart (tolerance "
                    f"{CLOCK_TOLERANCE_S:g}s): " + ", ".join(f"{h} {s:+.1f}s" for h, s in skews.items()),
                    {"skew_s": {h: round(s, 2) for h, s in skews.items()}},
                    "timedatectl set-ntp true   # or chronyc makestep, on each node")]


def judge(nodes, *, port: int, rdzv_host, nproc_per_node, shared_keys=None):
    """{ok, findings, table, multi_host, nodes: [{index, host, interface, address}]} from `nodes`
    ([{index, host, facts (checked) or None, error, received_at}], the head first)."""
    findings = []
    for n in nodes:
        if n.get("facts") is None:
            findings.append(Finding("gang.unreachable", "fail", f"{_who(n)} could not be asked: "
                                    f"{n['error']['message']}", {"host": n["host"], "kind": n["error"]["kind"]}))
    for host, other in (shared_keys or {}).items():
        findings.append(Finding("gang.same-box", "fail", f"{host} answers with the host key of {other}: one box "
                                "under two names (or a cloned image); it would run two nodes",
                                {"host": host, "same_key_as": other, "kind": HostKeyShared.kind},
                                "name each box once in --host"))
    rows = table(nodes)
    out = {"ok": False, "table": rows, "multi_host": None, "nodes": [], "dataplane": []}
    if findings:
        out["findings"] = worst_first(findings)
        return out
    head = nodes[0]
    multi_host = len({(n["facts"]["boot_id"], n["facts"]["netns"]) for n in nodes}) > 1
    findings += _software(nodes, rows, nproc_per_node) + _code(nodes, head) + _port(head, rdzv_host, port)
    findings += _reach(nodes, head, rdzv_host, port)
    iface_findings, chosen = _interfaces(nodes, head, multi_host)
    findings += iface_findings + gangplane.findings(nodes) + _clocks(nodes)
    out.update(ok=not any_failed(findings), findings=worst_first(findings), multi_host=multi_host,
               dataplane=gangplane.pairs(nodes),
               nodes=[{"index": n["index"], "host": n["host"], "interface": chosen[n["index"]][0],
                       "address": chosen[n["index"]][1]} for n in nodes])
    return out
