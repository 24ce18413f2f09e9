"""What preflight says of a Ray cluster whose head is the host (pure: the probe's facts and the
head's answer in, findings out; gpuops.onbox.engines.ray_engine.cluster_facts gathers them).

The head is seen when a GCS server owns a listening socket on the host. Then: is the dashboard
(the Jobs API) reachable; are the nodes Ray knows alive; does Ray schedule the CPUs and GPUs the
nodes have (a --num-gpus 0, or CUDA_VISIBLE_DEVICES hiding devices, leaves GPUs idle); and does
the object store fit /dev/shm (a classic trap: a container's 64 MB /dev/shm makes Ray put the
object store on /tmp, and every object goes through the disk).
"""

from ..boundary import expect
from ..errors import BadAnswer
from ..findings import Finding
from ..units import human_bytes

GCS = "gcs_server"
_CLUSTER = {"dashboard": str, "ray_version": str, "nodes": list, "shm_bytes": (int, type(None))}
_NUMBER = (int, float, type(None))
_NODE = {"hostname": str, "ip": str, "head": bool, "state": str, "ray_cpus": _NUMBER, "ray_gpus": _NUMBER,
         "object_store_bytes": _NUMBER, "box_cpus": _NUMBER, "box_gpus": int}


def present(facts):
    """A Ray head's GCS server listens on the host."""
    return any(isinstance(o, dict) and o.get("comm") == GCS
               for listener in facts.get("listeners") or [] if isinstance(listener, dict)
               for o in listener.get("owners") or [])


def findings(cluster):
    error = (cluster or {}).get("error")
    if error is not None:
        return [_unasked(error if isinstance(error, dict) else {"message": str(error)})]
    try:
        expect(cluster, _CLUSTER, "the Ray head", "cluster facts")
        for node in cluster["nodes"]:
            expect(node if isinstance(node, dict) else {}, _NODE, "the Ray head", "Ray node")
    except BadAnswer as e:
        return [Finding("ray.dashboard", "warn", "the Ray head's answer is not one gpuops reads", {"error": e.message})]
    out = [Finding("ray.dashboard", "ok", f"Ray {cluster['ray_version']} dashboard answers at {cluster['dashboard']} "
                                          "(the Jobs API)", {"dashboard": cluster["dashboard"]})]
    nodes = cluster["nodes"]
    dead = [n for n in nodes if n["state"] != "ALIVE"]
    if dead:
        out.append(Finding("ray.nodes", "warn", f"{len(dead)} of {len(nodes)} Ray nodes are not alive: "
                           + ", ".join(f"{n['hostname'] or n['ip']} ({n['state']})" for n in dead[:8]),
                           {"nodes": nodes}, "look at the node: `ray status` on the head, the raylet log on the node"))
    else:
        out.append(Finding("ray.nodes", "ok", f"{len(nodes)} Ray node(s) alive", {"nodes": len(nodes)}))
    out += _resources(nodes)
    out += _object_store(nodes, cluster["shm_bytes"])
    return out


def _unasked(error):
    kind, message = error.get("kind"), str(error.get("message") or "")[:300]
    if kind == "unreachable":
        return Finding("ray.dashboard", "fail", f"the Ray head's dashboard does not answer: {message}", {"error": error},
                       "start the head with its dashboard (ray start --head), or set RAY_ADDRESS to it in the "
                       "box's environment")
    # A GCS listens here, but not where this login's environment finds a head (another user's, or
    # one started with its own --temp-dir): nothing to judge, and nothing wrong with the box.
    return Finding("ray.dashboard", "info", f"a Ray GCS runs on this host, but this login finds no head: {message}",
                   {"error": error})


def _resources(nodes):
    short = []
    for n in nodes:
        name = n["hostname"] or n["ip"]
        if n["box_gpus"] and (n["ray_gpus"] or 0) < n["box_gpus"]:
            short.append(f"{name}: Ray schedules {n['ray_gpus'] or 0:g} of its {n['box_gpus']} GPUs")
        if n["box_cpus"] and n["ray_cpus"] is not None and n["ray_cpus"] < n["box_cpus"]:
            short.append(f"{name}: Ray schedules {n['ray_cpus']:g} of its {n['box_cpus']:g} CPUs")
    if short:
        return [Finding("ray.resources", "warn", "Ray does not schedule all the nodes have: " + "; ".join(short[:6]),
                        {"nodes": nodes}, "ray start --num-gpus/--num-cpus (or unset CUDA_VISIBLE_DEVICES) on the "
                                          "nodes, if that was not meant")]
    return [Finding("ray.resources", "ok", "Ray schedules every CPU and GPU its nodes have",
                    {"cpus": sum(n["ray_cpus"] or 0 for n in nodes), "gpus": sum(n["ray_gpus"] or 0 for n in nodes)})]


def _object_store(nodes, shm):
    head = next((n for n in nodes if n["head"]), None)
    store = head["object_store_bytes"] if head else None
    if not store or shm is None:
        return []
    evidence = {"object_store_bytes": store, "shm_bytes": shm}
    if store > shm:
        return [Finding("ray.object_store", "warn", f"the head's object store ({human_bytes(store)}) is larger than "
                        f"its /dev/shm ({human_bytes(shm)}): Ray keeps objects on /tmp instead, through the disk",
                        evidence, "give the head a bigger /dev/shm (docker run --shm-size), or ray start "
                                  "--object-store-memory under it")]
    return [Finding("ray.object_store", "ok", f"the head's object store ({human_bytes(store)}) fits its /dev/shm "
                    f"({human_bytes(shm)})", evidence)]
