"""A gang's data plane, judged: every ordered pair of nodes, from gpuops.onbox.gang.gang_peers' facts.

NCCL and Gloo connect between the nodes on ephemeral ports after the rendezvous; a pair that
cannot is refused here, per pair, with the fix on the side that listens. Pairs a node never got to
try (no table came: it could not reach the rendezvous) are left to the rendezvous findings.
"""

import ipaddress

from ..boundary import bounded, shaped
from ..errors import BadAnswer
from ..findings import Finding

NUMBER, NONE = (int, float), type(None)
_PLANE = {"address": (str, NONE), "port": (int, NONE), "error": (str, NONE), "peers": (int, NONE), "probes": list,
          "heard": list, "port_range": (list, NONE)}
_PROBE = {"node": int, "address": str, "port": int, "connected": bool, "answered": bool, "error": (str, NONE),
          "seconds": NUMBER + (NONE,), "attempts": int}
MAX_NODES, MAX_TEXT = 64, 512
SHOWN_PAIRS = 12  # findings past this are counted in one more, the pairs are all in the verdict


def _address(value, host: str):
    if value is not None:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            raise BadAnswer(f"{host}: the box's gang answer is not gpuops's: data-plane address {value!r}") from None


def checked(doc, host: str):
    """The `dataplane` part of a gang_facts answer once its shape, sizes and addresses are gpuops's."""
    plane = shaped(doc, _PLANE, host, "gang answer's data plane")
    _address(plane["address"], host)
    bounded(plane["port"], 1, 65535, host, "the data-plane port", "gang answer")
    bounded(plane["peers"], 0, MAX_NODES, host, "the data-plane peers", "gang answer")
    bounded(len(plane["probes"]), 0, MAX_NODES, host, "the data-plane probes", "gang answer")
    bounded(len(plane["heard"]), 0, MAX_NODES, host, "the data-plane hellos", "gang answer")
    bounded(len(plane["error"] or ""), 0, MAX_TEXT, host, "a text's length", "gang answer")
    if not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < MAX_NODES for n in plane["heard"]):
        raise BadAnswer(f"{host}: the box's gang answer is not gpuops's: data-plane hellos {plane['heard']!r:.80}")
    if plane["port_range"] is not None and not (len(plane["port_range"]) == 2 and all(
            isinstance(p, int) and not isinstance(p, bool) and 0 < p <= 65535 for p in plane["port_range"])):
        raise BadAnswer(f"{host}: the box's gang answer is not gpuops's: port range {plane['port_range']!r:.80}")
    for probe in plane["probes"]:
        shaped(probe, _PROBE, host, "gang answer's data-plane probe")
        _address(probe["address"], host)
        bounded(probe["port"], 1, 65535, host, "a peer's port", "gang answer")
        bounded(probe["node"], 0, MAX_NODES - 1, host, "a peer's node", "gang answer")
        bounded(len(probe["error"] or ""), 0, MAX_TEXT, host, "a text's length", "gang answer")
    return plane


def pairs(nodes):
    """[{from, to, address, port, ok, connected, error, seconds}]: every ordered pair some node tried."""
    out = []
    for n in nodes:
        plane = n["facts"]["dataplane"]
        for p in plane["probes"] if plane["peers"] is not None else []:
            out.append({"from": n["index"], "to": p["node"], "address": p["address"], "port": p["port"],
                        "ok": p["connected"] and p["answered"], "connected": p["connected"], "error": p["error"],
                        "seconds": p["seconds"]})
    return out


def _who(n) -> str:
    return f"node {n['index']} ({n['host']})"


def _fix(source, dest, pair) -> str:
    # Linux's default range, for a box that did not say its own.
    low, high = dest["facts"]["dataplane"]["port_range"] or (32768, 60999)
    frm = source["facts"]["dataplane"]["address"] or source["facts"]["route"]["address"] or "SOURCE_ADDR"
    if not pair["connected"]:
        return (f"on {dest['host']}: allow TCP from {frm} to ports {low}-{high} (its ephemeral range, where NCCL and "
                f"Gloo listen after the rendezvous), e.g. iptables -I INPUT -p tcp -s {frm} --dport {low}:{high} -j "
                "ACCEPT, or the same rule in the provider's firewall or security group; opening the rendezvous port "
                "alone is not enough")
    return (f"{pair['address']} is not {dest['host']} as {source['host']} sees it (NAT or port mapping between the "
            "boxes): run the gang on a network where the boxes reach each other's own addresses")


def findings(nodes):
    """Fail findings: a node that could not listen, and every pair that did not connect."""
    out = []
    by_index = {n["index"]: n for n in nodes}
    for n in nodes:
        plane = n["facts"]["dataplane"]
        if plane["error"]:
            out.append(Finding("gang.dataplane", "fail", f"{_who(n)} cannot listen on an ephemeral port of "
                               f"{plane['address']}, as NCCL and Gloo will: {plane['error']}",
                               {"host": n["host"], "address": plane["address"], "error": plane["error"]},
                               "sysctl net.ipv4.ip_local_port_range   # and that the address is this box's own"))
    failed = [p for p in pairs(nodes) if not p["ok"] and p["to"] in by_index]
    for pair in failed[:SHOWN_PAIRS]:
        source, dest = by_index[pair["from"]], by_index[pair["to"]]
        out.append(Finding("gang.dataplane", "fail",
                           f"{_who(source)} cannot connect to {_who(dest)} on its data-plane port "
                           f"{pair['address']}:{pair['port']}: {pair['error']}",
                           {"from": source["host"], "to": dest["host"], "address": pair["address"],
                            "port": pair["port"], "error": pair["error"]}, _fix(source, dest, pair), "VAST6"))
    if len(failed) > SHOWN_PAIRS:
        out.append(Finding("gang.dataplane", "fail", f"and {len(failed) - SHOWN_PAIRS} more pairs of nodes cannot "
                           "connect on their data-plane ports", {"pairs": len(failed)},
                           "the preflight's data plane table (--json: data.preflight.dataplane) names every pair"))
    return out
