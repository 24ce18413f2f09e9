"""The one torchrun command line and rendezvous environment, for every engine that starts one.

    words = command(["train.py", "--lr", "3e-4"], nnodes=2, nproc_per_node=8,
                    endpoint=endpoint("10.0.0.5", 29500), rdzv_id="g-20261124-a1b2c3",
                    is_host=True, local_addr="10.0.0.5")
    env = environment("ens5")         # {"NCCL_SOCKET_IFNAME": "ens5", "GLOO_SOCKET_IFNAME": "ens5", ...}
    line = shell_line(words)          # quoted for sh; "$SLURM_NNODES" stays a variable

A gang of boxes (gpuops.ops.gang) knows every value; a Slurm batch script knows some only as its
own variables (`nnodes="$SLURM_NNODES"`, the endpoint from `scontrol show hostnames`), so any
count, host or id may be one `$NAME` reference, kept expandable by `shell_line`. Pure: nothing here
touches a box.

Why these flags (seed 004, elastic training troubleshooting):
  * c10d rendezvous (no etcd to run); every node names the same endpoint and the same rdzv id, so
    a stale rendezvous of an earlier run can never be joined. The endpoint's store is hosted by the
    node told `is_host` (torch otherwise guesses from the hostname, and on a box whose hostname
    matches the endpoint loosely two nodes may both try to host it).
  * `--node-rank` only with the static backend: c10d assigns ranks as nodes join, and torchrun
    warns that it ignores the flag, so the caller keeps its own node index in its records instead.
  * `--local-addr`: what the other nodes use to reach this one (MASTER_ADDR of the worker group
    comes from it). Without it torchrun uses the FQDN, which on rented boxes is often a container
    id no other box can resolve.
  * The socket interface for NCCL and Gloo: left to guess, they may pick docker0, virbr0 or lo,
    and a multi-host job hangs at its first collective. Unknown: NCCL is told what never to use.
"""

import re
import shlex
from typing import Optional, Sequence

DEFAULT_PORT = 29500
BACKENDS = ("c10d", "static")
LAUNCHER = ("torchrun",)
# Interfaces that never carry traffic between hosts: loopback, container and VM bridges, and
# their veth ends (prefixes; loopback is exactly "lo"). NCCL's own default skips only lo and docker*.
NOT_BETWEEN_HOSTS = ("lo", "docker", "virbr", "veth", "br-", "cni", "cali")
IFACE_VARS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME")

_REF = r"\$(?:[A-Za-z_][A-Za-z0-9_]*|\{[A-Za-z_][A-Za-z0-9_]*\})"
_VAR = re.compile(f"^{_REF}$")
# A word of variable references and characters sh gives no meaning to: safe to expand in "...".
_EXPANDS = re.compile(f"^(?:{_REF}|[A-Za-z0-9_.:/@,=+%\\[\\]-])*{_REF}(?:{_REF}|[A-Za-z0-9_.:/@,=+%\\[\\]-])*$")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.:-]{0,252}$")
_IFACE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,14}$")  # IFNAMSIZ: 15 characters


def is_variable(value) -> bool:
    """True for one shell variable reference ('$SLURM_NNODES', '${SLURM_NODEID}')."""
    return isinstance(value, str) and bool(_VAR.match(value))


def _count(name: str, value, low=1):
    if is_variable(value):
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be a whole number of at least {low} or one $VARIABLE, not {value!r}")
    return str(value)


def endpoint(host: str, port=DEFAULT_PORT) -> str:
    """'host:port' for --rdzv-endpoint; an IPv6 address is bracketed."""
    if not (is_variable(host) or (isinstance(host, str) and _HOST.match(host))):
        raise ValueError(f"rendezvous host {host!r} is not a host name, an address or one $VARIABLE")
    if not is_variable(port) and (isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536):
        raise ValueError(f"rendezvous port {port!r} is not a TCP port")
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{port}"


def command(script, **options_kw) -> list:
    """The argv of one node's torchrun: `options(...)`, then `script` (the training script or
    `-m module`, and its arguments)."""
    script = list(script)
    if not script or not script[0]:
        raise ValueError("torchrun needs a training script (or -m module) to run")
    return options(**options_kw) + script


def options(*, nnodes, nproc_per_node, endpoint, rdzv_id, node_rank=None, backend="c10d", is_host: Optional[bool]=None,
            local_addr=None, max_restarts=None, join_timeout_s=None, launcher=LAUNCHER) -> list:
    """`launcher` and its options, for a caller that appends the script as shell text of its own
    (a job's --cmd, run by bash as written). ValueError names the first value that cannot be."""
    if backend not in BACKENDS:
        raise ValueError(f"rendezvous backend {backend!r}: gpuops starts {' or '.join(BACKENDS)}")
    if not (is_variable(rdzv_id) or (isinstance(rdzv_id, str) and _ID.match(rdzv_id))):
        raise ValueError(f"rendezvous id {rdzv_id!r}: letters, digits, '.', '_' and '-' only")
    elastic = isinstance(nnodes, str) and re.match(r"^[1-9][0-9]{0,3}:[1-9][0-9]{0,3}$", nnodes)
    if elastic and int(nnodes.split(":")[0]) > int(nnodes.split(":")[1]):
        raise ValueError(f"nnodes {nnodes!r}: MIN:MAX needs MIN <= MAX")
    words = list(launcher) + ["--nnodes", nnodes if elastic else _count("nnodes", nnodes), "--nproc-per-node",
                              _count("nproc_per_node", nproc_per_node), "--rdzv-backend", backend,
                              "--rdzv-endpoint", endpoint, "--rdzv-id", rdzv_id]
    if backend == "static":
        if node_rank is None:
            raise ValueError("the static rendezvous needs each node's rank")
        words += ["--node-rank", _count("node_rank", node_rank, low=0)]
    conf = []
    if is_host is not None:
        conf.append(f"is_host={int(bool(is_host))}")
    if join_timeout_s is not None:
        conf.append(f"join_timeout={_count('join_timeout_s', join_timeout_s)}")
    if conf:
        words += ["--rdzv-conf", ",".join(conf)]
    if local_addr is not None:
        if not (is_variable(local_addr) or _HOST.match(str(local_addr))):
            raise ValueError(f"local address {local_addr!r} is not a host name or an address")
        words += ["--local-addr", local_addr]
    if max_restarts is not None:
        words += ["--max-restarts", _count("max_restarts", max_restarts, low=0)]
    return words


def interface_problem(name: str, multi_host=True):
    """Why `name` cannot carry a multi-host job's traffic (None when it can). On one host (all
    nodes in one network namespace) loopback is the right one, so only then is it allowed."""
    if not isinstance(name, str) or not _IFACE.match(name):
        return f"{name!r} is not an interface name"
    if name == "lo" and not multi_host:
        return None
    hit = next((p for p in NOT_BETWEEN_HOSTS if name == p or (p != "lo" and name.startswith(p))), None)
    if hit:
        kind = "loopback" if hit == "lo" else "a container or VM bridge"
        return f"{name} is {kind}: other hosts cannot reach this one through it"
    return None


def environment(interface=None, multi_host=True) -> dict:
    """The environment that pins NCCL's, Gloo's and TensorPipe's sockets to `interface`. Without
    one (a Slurm node, chosen by the scheduler), NCCL is told which kinds never to use; Gloo has
    no exclusion form and is left to resolve the hostname."""
    if interface is None:
        return {"NCCL_SOCKET_IFNAME": "^" + ",".join(p for p in NOT_BETWEEN_HOSTS if multi_host or p != "lo")}
    if is_variable(interface):
        return dict.fromkeys(IFACE_VARS, interface)
    problem = interface_problem(interface, multi_host)
    if problem:
        raise ValueError(problem)
    return dict.fromkeys(IFACE_VARS, interface)


def shell_line(words: Sequence[str]) -> str:
    """`words` as one sh command line, each quoted: a word made only of $VARIABLE references and
    characters sh gives no meaning to ('$HEAD:29500') is double-quoted, so the shell expands it and
    its value stays one word; every other word is single-quoted, taken as it is."""
    return " ".join(f'"{w}"' if _EXPANDS.match(str(w)) else shlex.quote(str(w)) for w in words)
