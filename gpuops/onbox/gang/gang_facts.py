"""On-box facts for a gang preflight, in one exec per node. Entry: main(argv); options on stdin:

    {"role": "head"|"worker", "node": i, "host": RDZV HOST, "port": P, "window": S, "nonce": HEX,
     "expect": number of workers (head), "code": manifest request|null}

What this node would run (driver, the driver's CUDA, torch and the CUDA it was built for, python),
its code tree's digest, its interfaces, network namespace and clock, and the rendezvous tested for
real, since every node's call runs at the same time: the head binds the port (so it is free, or
the answer names who holds it) and listens; every other node connects to host:port from its own
side (a real TCP connect, seed 004's `nc -zv $MASTER_ADDR $MASTER_PORT`) and trades the preflight's
nonce with the head, so a connection that reached some other listener at that address is told
apart from one that reached the head. The interface each node's traffic takes is the one holding
the local address of that connection. Then the data plane (gang_peers): each node listens on an
ephemeral port of that address, as NCCL and Gloo will, tells the head in its hello, the head hands
every node the table, and every node connects to every other.

Only facts leave the box; whether the nodes agree is judged by the caller (gpuops.jobs.gangcheck).
"""

import hashlib
import json
import os
import socket
import sys
import time

from . import gang_peers
from ..host import gpu, netifs, netports, procs, torchinfo
from ..sync import manifest
from typing import Sequence

LINE_MAX = 200
MAX_WINDOW_S = 60.0
MAX_CODE_ENTRIES = 2000  # listed for naming what differs; the digest covers every file
MAX_HOLDERS = 10
HELLO = "gpuops-gang"
PEER_WINDOW_S = 5.0  # every node connects to every other's listener within this, at most


def holders(port: int):
    """[{pid, comm, cmd}] of the processes whose listening socket holds `port`."""
    inodes = ["socket:[%d]" % l["inode"] for l in netports.listeners() if l["port"] == port]
    if not inodes:
        return []
    found, _ = procs.device_holders(prefixes=tuple(inodes), exclude=procs.ancestry())
    out = []
    for h in found[:MAX_HOLDERS]:
        st = procs.stat(h["pid"]) or {}
        out.append({"pid": h["pid"], "comm": st.get("comm"), "cmd": procs.cmdline(h["pid"], 200)})
    return out


def _hello(words: Sequence[str], nonce):
    """(node, address, port or None) from a worker's hello, or None when it is not one."""
    if len(words) != 5 or words[:2] != [HELLO, nonce] or not words[2].isdigit():
        return None
    return int(words[2]), words[3][:64], int(words[4]) if words[4].isdigit() else None


def listen(port: int, window, nonce, expect):
    """The head's side: bind the port as torch's store will (SO_REUSEADDR, every address), then
    hear each worker's hello until all came or the window closed, and send every worker the table
    of data-plane listeners. (rendezvous facts, (listener, its facts, table))."""
    out = {"role": "head", "port": port, "free": True, "error": None, "holders": [], "heard": [], "strangers": 0}
    plane, listening, table, held = None, {"address": None, "port": None, "error": None}, {}, []
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        server.bind(("", port))
        server.listen(64)
    except (OSError, IOError) as e:
        server.close()
        out.update(free=False, error=os.strerror(e.errno) if e.errno else str(e), holders=holders(port))
        return out, (None, listening, None)
    deadline = time.time() + window
    try:
        while len(out["heard"]) < expect and time.time() < deadline:
            server.settimeout(max(0.01, deadline - time.time()))
            try:
                conn, peer = server.accept()
            except (OSError, socket.timeout):
                continue
            try:
                lines = gang_peers.Lines(conn)
                hello = _hello((lines.read(min(deadline, time.time() + 3)) or "").split(), nonce)
                if hello is None:
                    out["strangers"] += 1
                    conn.close()
                    continue
                at = conn.getsockname()[0]
                out["heard"].append({"node": hello[0], "from": peer[0], "at": at})
                if plane is None and not listening["error"]:
                    plane, listening = gang_peers.bind(at)
                if hello[2] is not None:
                    table[hello[0]] = (hello[1], hello[2])
                conn.sendall(("%s %s head\n" % (HELLO, nonce)).encode("ascii"))
                held.append(conn)
            except (OSError, IOError):
                out["strangers"] += 1
                conn.close()
    finally:
        server.close()
    if listening["port"] is not None:
        table[0] = (listening["address"], listening["port"])
    line = ("%s %s peers %s\n" % (HELLO, nonce, gang_peers.encode(table))).encode("ascii")
    for conn in held:
        try:
            conn.sendall(line)
        except (OSError, IOError):
            pass
        finally:
            conn.close()
    return out, (plane, listening, table if held else None)


def reach(host: str, port: int, window, nonce, node):
    """A worker's side: connect to host:port until it answers or the window closes, say hello
    (with this node's data-plane listener), read whether the head answered with the same nonce,
    then the table of every node's listener. (rendezvous facts, (listener, its facts, table))."""
    out = {"role": "worker", "connected": False, "answered": False, "error": None, "seconds": None, "local": None,
           "attempts": 0}
    plane, listening, table = None, {"address": None, "port": None, "error": None}, None
    began = time.time()
    deadline = began + window
    while time.time() < deadline:
        out["attempts"] += 1
        try:
            conn = socket.create_connection((host, port), timeout=max(0.05, min(3.0, deadline - time.time())))
        except (OSError, IOError) as e:
            out["error"] = (os.strerror(e.errno) if getattr(e, "errno", None) else str(e) or type(e).__name__)[:200]
            time.sleep(min(0.2, max(0.0, deadline - time.time())))
            continue
        try:
            out.update(connected=True, error=None, local=conn.getsockname()[0], seconds=round(time.time() - began, 3))
            plane, listening = gang_peers.bind(out["local"])
            conn.sendall(("%s %s %d %s %s\n" % (HELLO, nonce, node, out["local"], listening["port"] or "-"))
                         .encode("ascii"))
            lines = gang_peers.Lines(conn)
            reply = lines.read(min(deadline + 3, time.time() + 5))
            out["answered"] = reply == "%s %s head" % (HELLO, nonce)
            if not out["answered"]:
                out["error"] = "something answered at %s:%d, but not this preflight's head" % (host, port)
            else:
                # The head sends the table once every worker said hello, or its window closed.
                words = (lines.read(deadline + 5, gang_peers.TABLE_MAX) or "").split()
                if words[:3] == [HELLO, nonce, "peers"]:
                    table = gang_peers.decode(words[3:])
        except (OSError, IOError) as e:
            out["error"] = str(e)[:200]
        finally:
            conn.close()
        break
    return out, (plane, listening, table)


def code(request) -> dict:
    """{dir, exists, files, bytes, digest, entries: [[rel, sha256 or link]], truncated, errors}."""
    doc = manifest.build(request)
    entries = sorted(doc["entries"])
    digest = hashlib.sha256()
    for e in entries:
        digest.update(json.dumps([e.rel, e.kind, e.size if e.kind == "f" else None, e.sha256, e.link],
                                 ensure_ascii=False).encode("utf-8", "surrogateescape"))
    files = [e for e in entries if e.kind == "f"]
    listed = [[e.rel, e.sha256 if e.kind == "f" else e.link] for e in entries if e.kind in ("f", "l")]
    return {"dir": doc["root"], "exists": doc["is_dir"], "files": len(files), "bytes": sum(e.size for e in files),
            "digest": digest.hexdigest(), "entries": listed[:MAX_CODE_ENTRIES],
            "truncated": len(listed) > MAX_CODE_ENTRIES, "errors": len(doc["errors"])}


def _gpu(state) -> dict:
    doc = gpu.end(state)
    return {"driver": doc.get("driver"), "cuda_max": doc.get("cuda_max"), "error": doc.get("error"),
            "count": len(doc.get("devices") or []),
            "names": [d.get("name") for d in (doc.get("devices") or [])][:64]}


def main(argv) -> int:
    sys.dont_write_bytecode = True
    try:
        opts = json.loads(sys.stdin.buffer.read().decode("utf-8"))
        port, window, node = int(opts["port"]), max(0.0, min(float(opts["window"]), MAX_WINDOW_S)), int(opts["node"])
        nonce, role = str(opts["nonce"]), opts["role"]
    except (ValueError, KeyError, TypeError) as e:
        sys.stdout.write(json.dumps({"error": {"kind": "usage", "message": "gang_facts options: %s" % e}}))
        return 0
    # The slow parts (the torch import in a child, nvidia-smi) run while the rendezvous is tested.
    torch_pending, gpu_state = torchinfo.begin(), gpu.begin()
    if role == "head":
        rendezvous, plane = listen(port, window, nonce, int(opts.get("expect") or 0))
    else:
        rendezvous, plane = reach(opts["host"], port, window, nonce, node)
    dataplane = gang_peers.exchange(plane[0], plane[1], plane[2], nonce, node,
                                    max(1.0, min(window, PEER_WINDOW_S)))
    found = netifs.interfaces()
    # The interface this node's gang traffic takes: the one holding the address the rendezvous
    # connection used here (a worker's own end, the address the head was reached at).
    used = rendezvous.get("local") or next((h["at"] for h in rendezvous.get("heard") or []), None)
    rendezvous["interface"] = netifs.owner(used, found) if used else None
    route = netifs.source_for(opts["host"], port) if opts.get("host") else None
    doc = {"node": node, "hostname": socket.gethostname()[:255], "boot_id": procs.boot_id(),
           "netns": netifs.namespace(), "python": "%d.%d.%d" % sys.version_info[:3], "interfaces": found,
           "route": {"address": route, "interface": netifs.owner(route, found) if route else None},
           "rendezvous": rendezvous, "dataplane": dataplane, "code": code(opts["code"]) if opts.get("code") else None}
    doc["gpu"] = _gpu(gpu_state)
    doc["torch"] = torchinfo.end(torch_pending)
    doc["now"] = time.time()
    sys.stdout.write(json.dumps(doc))
    return 0
