"""Gang jobs: one torchrun run across several boxes, launched as one and kept as one record.

`launch` runs the gang preflight first: every node is asked at once, one round trip each
(gpuops.onbox.gang.gang_facts: the head listens on the rendezvous port while every other node connects
to it), and the answers are judged by the pure gpuops.jobs.gangcheck. Anything that would make the
run fail later refuses it now (exit 5; exit 3 when a node cannot be asked), and nothing starts.
Then every node gets an ordinary box job (gpuops.ops.jobs.launch: its own supervisor, log and exit
record) running torchrun (gpuops.jobs.torchrun) with the gang id as rendezvous id, labelled with
the gang id and its node index; the gang record goes to gpuops.jobs.gangstore. `retry` launches the
gang again from its record once none of its nodes runs. status, logs, stop and diagnose of a
gang: gpuops.ops.gangview.
"""

import json
import os
import re
import shlex
import time

from .. import errors, profiles
from ..envelope import CODE_KEY, envelope, step
from ..engines import platform
from ..jobs import gang, gangcheck, gangstore, torchrun
from ..remote import hostspec, knownkeys
from ..remote.fanout import each_host
from ..remote.targets import target_for
from ..sync import rules
from . import jobs
from typing import Optional, Sequence

MAX_NODES = 64
WINDOW_S = 15.0  # the head listens, and each other node keeps trying to connect, this long at most
SLACK_S = 60.0  # past the window: the torch import (seconds on a cold disk), nvidia-smi, hashing the code
# The torch whose version the preflight compared is the box's python3's, so that python3 runs the
# launcher; a `torchrun` on PATH may belong to another environment.
LAUNCHER = ("python3", "-m", "torch.distributed.run")


def check_request(hosts: Sequence[str], cmd, nproc_per_node):
    """UsageError for what is wrong before any box is asked."""
    if not hosts:
        raise errors.UsageError("--torchrun needs the boxes of the gang in --host a,b,...")
    twice = sorted({h for h in hosts if hosts.count(h) > 1})
    if twice:
        raise errors.UsageError(f"--host names {', '.join(twice)} more than once: a box runs one node of a gang")
    if len(hosts) > MAX_NODES:
        raise errors.UsageError(f"a gang has at most {MAX_NODES} nodes, got {len(hosts)}")
    if isinstance(nproc_per_node, bool) or not isinstance(nproc_per_node, int) or not 1 <= nproc_per_node <= 64:
        raise errors.UsageError(f"--nproc-per-node takes 1 to 64 processes, not {nproc_per_node!r}")
    try:
        words = shlex.split(cmd or "")
    except ValueError as e:
        raise errors.UsageError(f"--cmd cannot be split into words: {e}") from None
    if not words:
        raise errors.UsageError("--cmd names the training script torchrun runs, e.g. 'train.py --lr 3e-4'")
    if re.fullmatch(r"python[0-9.]*", os.path.basename(words[0])):  # an interpreter, not python_tools.py
        raise errors.UsageError(f"--cmd is what torchrun runs with python: drop the leading {words[0]!r} "
                                f"(--cmd {shlex.join(words[1:])!r})")


def rendezvous_host(head, identity=None):
    """Where the other nodes reach the head by default: the address SSH reaches it at (its
    ssh_config HostName), or loopback for this machine."""
    if hostspec.is_local(head):
        return "127.0.0.1"
    return hostspec.resolve(head, identity).hostname


def _code_request(code):
    # Hashing with the box's digest cache, as `verify` does: the next preflight of an unchanged
    # tree reads no file again. Writing that cache on the box is part of launching there.
    return dict(rules.request(), root=code, hash="all", cache="use") if code else None


def preflight(hosts: Sequence[str], *, nproc_per_node, port: int, rdzv_host, code=None, identity=None, window_s=WINDOW_S):
    """The judged gang preflight (gpuops.jobs.gangcheck.judge's document), every node asked at once."""
    nonce = os.urandom(8).hex()
    request = _code_request(code)

    def ask(host: str):
        index = hosts.index(host)
        role = "head" if index == 0 else "worker"
        opts = {"role": role, "node": index, "host": rdzv_host, "port": port, "window": window_s, "nonce": nonce,
                "expect": len(hosts) - 1, "code": request}
        target = target_for(host, identity)
        try:
            doc = target.run_onbox("gang_facts", [], stdin=json.dumps(opts).encode("utf-8"),
                                   timeout_s=window_s + SLACK_S)
            received = time.time()
            if doc.get("error"):
                jobs.raise_reported(target, doc["error"] if isinstance(doc["error"], dict) else {})
            facts = gangcheck.checked(doc, host)
            if facts["node"] != index or facts["rendezvous"]["role"] != role:
                raise errors.BadAnswer(f"{host}: the box's gang answer is not gpuops's: it answered as node "
                                       f"{facts['node']} ({facts['rendezvous']['role']}), asked as {index} ({role})")
            return {"facts": facts, "received_at": received, "keys": knownkeys.of_target(target)}
        finally:
            target.close()

    nodes = []
    # All at once, not a bounded few: the head listens only while the others connect.
    for index, (host, value) in enumerate(each_host(hosts, ask, max_workers=len(hosts))):
        node = {"index": index, "host": host, "facts": None, "error": None}
        if isinstance(value, errors.GpuopsError):
            node["error"] = value.as_dict()
        elif isinstance(value, Exception):
            raise value
        else:
            node.update(value)
        nodes.append(node)
    shared = knownkeys.shared({n["host"]: n["keys"] for n in nodes if n.get("keys")})
    verdict = gangcheck.judge(nodes, port=port, rdzv_host=rdzv_host, nproc_per_node=nproc_per_node,
                              shared_keys=shared)
    verdict["rdzv_host"] = rdzv_host
    return verdict


def _refusal(pre, gang_id):
    failed = [f for f in pre["findings"] if f.severity == "fail"]
    # A node that could not be used at all (unreachable, one box under two names) is the host's
    # error (exit 3); every other refusal is a refusal (exit 5).
    node_errors = [f.evidence["kind"] for f in failed if f.id in ("gang.unreachable", "gang.same-box")]
    kind = node_errors[0] if node_errors else errors.Refused.kind
    message = f"gang refused before launch: {failed[0].title}"
    if len(failed) > 1:
        message += f" (and {len(failed) - 1} more)"
    # An answer, not a failure to get one: the findings and the table are what to read, so they
    # travel as the envelope's findings and data (no error object), with the refusal's exit code.
    out = envelope("launch", ok=False, summary=message + "; nothing was started",
                   data={"gang_id": gang_id, "refused": kind,
                         "preflight": {k: v for k, v in pre.items() if k != "findings"}},
                   findings=pre["findings"])
    out[CODE_KEY] = errors.code_for_kind(kind)
    return out


def launch(hosts: Sequence[str], *, cmd, nproc_per_node, port: int = torchrun.DEFAULT_PORT, rdzv_host=None, code=None, name: Optional[str]=None,
           env=None, secrets=None, workdir=None, gpus=None, jobs_dir=None, profile=None, identity=None, parent=None,
           window_s=WINDOW_S, policy=None, max_restarts=None, nnodes=None):
    """Preflight the gang, then start one torchrun node per host; the launch envelope. With a run
    `policy` (gpuops.jobs.runpolicy.build) every node is a run whose supervisor keeps a link to the
    others (gpuops.onbox.gang.ganglink): the head's node starts first, and the port it listens on goes
    to the rest. `max_restarts` and `nnodes` ('MIN:MAX') are torchrun's own elastic options."""
    check_request(hosts, cmd, nproc_per_node)
    nnodes = elastic_nnodes(nnodes, len(hosts))
    if gpus and nproc_per_node > len(gpus.split(",")):
        raise errors.UsageError(f"--nproc-per-node {nproc_per_node} is more than the {len(gpus.split(','))} "
                                f"GPU(s) --gpus {gpus} leaves each node")
    if profile is not None:  # the records' directory the later verbs must look in
        jobs_dir = platform.records_dir(profile, jobs_dir)[0]
    rdzv_host = rdzv_host or rendezvous_host(hosts[0], identity)
    gang_id = gang.new_id()
    pre = preflight(hosts, nproc_per_node=nproc_per_node, port=port, rdzv_host=rdzv_host, code=code,
                    identity=identity, window_s=window_s)
    if not pre["ok"]:
        return _refusal(pre, gang_id)
    endpoint = torchrun.endpoint(rdzv_host, port)
    plan = {n["index"]: n for n in pre["nodes"]}

    # a gang of one (an elastic gang gone down to its last node) has no peer to keep a link to
    link = {"token": os.urandom(16).hex(), "nodes": len(hosts), "head": plan[0]["address"], "port": None} \
        if policy and len(hosts) > 1 else None

    def start(host: str):
        index = hosts.index(host)
        node = plan[index]
        words = torchrun.options(nnodes=nnodes, nproc_per_node=nproc_per_node, endpoint=endpoint,
                                 rdzv_id=gang_id, is_host=index == 0, local_addr=node["address"],
                                 max_restarts=max_restarts or 0, launcher=LAUNCHER)
        node_env = dict(torchrun.environment(node["interface"], pre["multi_host"]), **(env or {}))
        target = target_for(host, identity)
        try:
            return jobs.launch(target, command=f"{torchrun.shell_line(words)} {cmd}",
                               name=f"{name or 'gang'}-node{index}", labels=gang.labels(gang_id, index, len(hosts)),
                               env=node_env, secrets=secrets, workdir=workdir, gpus=gpus, key=f"{gang_id}-node{index}",
                               jobs_dir=jobs_dir, profile=profile, policy=node_policy(policy, link, index))
        finally:
            target.close()

    started = _start_nodes(hosts, start, link)
    record = {"gang_id": gang_id, "created_at": time.time(), "parent_gang_id": parent,
              "spec": {"hosts": hosts, "cmd": cmd, "nproc_per_node": nproc_per_node, "name": name, "workdir": workdir,
                       "env": env or {}, "secret_env_names": sorted(secrets or {}), "code": code, "rdzv_port": port,
                       "rdzv_host": rdzv_host, "jobs_dir": jobs_dir, "gpus": gpus, "policy": policy,
                       "max_restarts": max_restarts, "nnodes": nnodes if isinstance(nnodes, str) else None,
                       "profile": profile.name if profile is not None else None},
              "rendezvous": {"host": rdzv_host, "port": port, "id": gang_id, "multi_host": pre["multi_host"],
                             "nnodes": len(hosts), "world_size": len(hosts) * nproc_per_node},
              "nodes": []}
    failed = []
    for (host, value), node in zip(started, pre["nodes"]):
        entry = {"index": node["index"], "host": host, "interface": node["interface"], "address": node["address"],
                 "job_id": None, "pid": None, "launch_error": None}
        if isinstance(value, errors.GpuopsError):
            entry["launch_error"] = value.as_dict()
        elif isinstance(value, Exception):
            entry["launch_error"] = {"kind": "internal", "message": f"{type(value).__name__}: {value}"}
        else:
            if value["data"]["meta"].get("pid"):  # it started, though it may have died at launch already
                entry.update(job_id=value["data"]["job"]["job_id"], pid=value["data"]["meta"]["pid"])
            if not value["ok"]:
                entry["launch_error"] = {"kind": "refused", "message": value["summary"]}
        if entry["launch_error"]:
            failed.append(entry)
        record["nodes"].append(entry)
    gangstore.save(record)
    return _launched(record, pre, failed)


def elastic_nnodes(nnodes, count: int):
    """torchrun's --nnodes for a gang of `count` boxes: the count, or an elastic 'MIN:MAX' that
    admits it (torchrun then starts once MIN nodes joined, and takes up to MAX)."""
    if nnodes in (None, ""):
        return count
    low, colon, high = str(nnodes).partition(":")
    if not colon or not (low.isdigit() and high.isdigit()) or not 1 <= int(low) <= count <= int(high) <= MAX_NODES:
        raise errors.UsageError(f"--nnodes takes MIN:MAX with MIN <= {count} <= MAX (the gang's {count} boxes) and "
                                f"MAX <= {MAX_NODES}, not {str(nnodes)[:40]!r}")
    return f"{int(low)}:{int(high)}"


def node_policy(policy, link, index):
    """Node `index`'s run policy: the gang's, with its place on the link between the supervisors."""
    if not policy or link is None:
        return policy
    place = {"node": index, "nodes": link["nodes"], "token": link["token"]}
    if index == 0:
        place["bind"] = link["head"]
    else:
        place.update(head=link["head"], port=link["port"])
    return dict(policy, gang=place)


def _start_nodes(hosts: Sequence[str], start, link):
    """[(host, launch envelope or error)] of every node: at once, or (a run's gang) the head first,
    then the rest with the port its supervisor listens on."""
    if link is None:
        return each_host(hosts, start, max_workers=len(hosts))
    head = each_host(hosts[:1], start, max_workers=1)
    value = head[0][1]
    port = None if isinstance(value, Exception) else value["data"]["meta"].get("gang_port")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        # the head, if it started, ends itself when no node joins its link (gangrules.JOIN_S)
        why = errors.BadAnswer(f"{hosts[0]}: the gang's head did not say where its supervisor listens "
                               f"(gang_port {str(port)[:40]!r}); the other nodes were not started")
        return head + [(h, why) for h in hosts[1:]]
    link["port"] = port
    return head + each_host(hosts[1:], start, max_workers=len(hosts) - 1)


def _launched(record, pre, failed):
    gang_id, r = record["gang_id"], record["rendezvous"]
    data = {"gang": record, "preflight": {k: v for k, v in pre.items() if k != "findings"}}
    if failed:
        names = ", ".join(f"{gang.node_name(e['index'], e['host'])}: {e['launch_error']['message']}" for e in failed)
        summary = (f"gang {gang_id} started on {len(record['nodes']) - len(failed)} of {len(record['nodes'])} "
                   f"nodes ({names}); the started ones wait for the rest at the rendezvous until torch's join "
                   "timeout: stop them")
        return envelope("launch", ok=False, summary=summary, data=data, findings=pre["findings"],
                        next=[step("gpuops", "stop", "--gang", gang_id)])
    summary = (f"started gang {gang_id}: {r['nnodes']} nodes x {record['spec']['nproc_per_node']} processes "
               f"(world size {r['world_size']}), rendezvous {r['host']}:{r['port']}")
    return envelope("launch", ok=True, summary=summary, data=data, findings=pre["findings"],
                    next=[step("gpuops", "status", "--gang", gang_id),
                          step("gpuops", "logs", "--gang", gang_id, "--follow")])


def retry(gang_id, *, resume_arg=None, env=None, secrets=None, identity=None, window_s=WINDOW_S):
    """Launch the gang again from its record (a new gang id, parent_gang_id set), once none of its
    nodes runs any more."""
    from . import gangview

    record = gangstore.load(gang_id)
    alive = [n for n in gangview.node_rows(record, identity) if n["row"]["state"] in gangview.STILL_RUNNING]
    if alive:
        running = ", ".join(gang.node_name(n["index"], n["host"]) for n in alive)
        raise errors.Refused(f"gang {gang_id} still runs on {running}; stop it first (gpuops stop --gang {gang_id}):"
                             " retry never runs two copies")
    spec = record["spec"]
    missing = sorted(set(spec.get("secret_env_names") or []) - set(secrets or {}))
    if missing:
        raise errors.UsageError(f"gang {gang_id} was launched with secrets {', '.join(missing)}: pass --secret-env "
                                "for each")
    cmd = spec["cmd"] + (f" {resume_arg}" if resume_arg else "")
    profile = profiles.load(spec["profile"]) if spec.get("profile") else None
    return launch(spec["hosts"], cmd=cmd, nproc_per_node=spec["nproc_per_node"], port=spec["rdzv_port"],
                  rdzv_host=spec["rdzv_host"], code=spec.get("code"), name=spec.get("name"),
                  env=dict(spec.get("env") or {}, **(env or {})), secrets=secrets, workdir=spec.get("workdir"),
                  gpus=spec.get("gpus"), jobs_dir=spec.get("jobs_dir"), profile=profile, identity=identity,
                  parent=gang_id, window_s=window_s, policy=spec.get("policy"), max_restarts=spec.get("max_restarts"),
                  nnodes=spec.get("nnodes"))
