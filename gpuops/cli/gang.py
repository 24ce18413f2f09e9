"""The job verbs' other targets: a gang (`--torchrun` on several boxes, then `--gang ID`) and a
fleet placement (`launch --fleet F --gpus N`). The verbs in gpuops.cli.jobs parse their flags and
hand over here when one of these is asked for; each function returns the envelope. What a gang
takes is narrower than one box's (gpuops.surface.jobs: GANG_NODES, GANG_PORT)."""

from ..errors import UsageError
from ..jobs import spec
from ..remote.hostspec import split_hosts
from ..surface.jobs import GANG_NODES, GANG_PORT
from .flags import number
from typing import Sequence

# The flags of one box's job that mean nothing for a gang (which has its own id and node records).
_NOT_FOR_GANG = {"--script": "--torchrun runs --cmd's training script on every box (push the code first)",
                 "--key": "a gang is named by the id launch prints",
                 "--label": "each node is labelled gang=ID, gang_node=N",
                 "--progress-regex": "a gang's nodes use the built-in progress lines",
                 "--gpu-type": "it places a --fleet job", "--min-vram-gib": "it places a --fleet job"}
NOT_FOR_ONE_BOX = {"--gpu-type": "it places a --fleet job", "--min-vram-gib": "it places a --fleet job",
                   "--code": "it is compared across a --torchrun gang's boxes",
                   "--rdzv-host": "it is a --torchrun gang's"}


def refuse(given, reasons):
    """UsageError for the first flag in `given` ({flag: value}) that is set and has a reason."""
    for flag, value in given.items():
        if value and flag in reasons:
            raise UsageError(f"{flag} does not apply here: {reasons[flag]}")


def launch_several(*, host: str, fleet, torchrun, identity, gpus, gpu_type, min_vram_gib, cmd, nproc_per_node,
                   rdzv_port, rdzv_host, code, one_job, elastic=None, **common):
    """`launch --fleet` (one job, placed) or `launch --torchrun` (a gang, on --host's boxes or on
    every box of a --fleet group, in its order): the envelope."""
    if fleet and host:
        raise UsageError("give --host or --fleet, not both: " + ("--fleet names the gang's boxes" if torchrun
                                                                  else "--fleet picks the box"))
    if fleet and not torchrun:
        refuse({"--code": code, "--rdzv-host": rdzv_host}, NOT_FOR_ONE_BOX)
        refuse({"--max-restarts": (elastic or {}).get("max_restarts") is not None,
                "--nnodes": (elastic or {}).get("nnodes")}, {"--max-restarts": "it is a --torchrun gang's",
                                                            "--nnodes": "it is a --torchrun gang's"})
        return _placed(fleet, gpus=gpus, gpu_type=gpu_type, min_vram_gib=min_vram_gib, identity=identity,
                       command=cmd, **one_job, **common)
    if not host and not fleet:
        raise UsageError("--torchrun needs the gang's boxes: --host a,b or --fleet NAME (the first hosts the "
                         "rendezvous)")
    refuse({"--script": one_job["script"], "--key": one_job["key"], "--label": one_job["labels"],
            "--progress-regex": one_job["progress_regex"], "--gpu-type": gpu_type, "--min-vram-gib": min_vram_gib},
           _NOT_FOR_GANG)
    if fleet:
        from .. import fleetfile

        hosts = fleetfile.aliases(fleet)
    else:
        hosts = split_hosts(host)
    return _gang(hosts, cmd=cmd, nproc_per_node=nproc_per_node, rdzv_port=rdzv_port, rdzv_host=rdzv_host, code=code,
                 identity=identity, gpus=spec.gpus(gpus), policy=one_job.get("policy"), **(elastic or {}), **common)


def _gang(hosts: Sequence[str], *, cmd, nproc_per_node, rdzv_port, rdzv_host, code, identity, **launch_kw):
    from ..jobs import torchrun
    from ..ops import gang

    port = number("--rdzv-port", rdzv_port, *GANG_PORT, integer=True, what="a TCP port")
    nproc = number("--nproc-per-node", nproc_per_node, *GANG_NODES, integer=True)
    if rdzv_host is not None:
        try:
            torchrun.endpoint(rdzv_host, port)
        except ValueError as e:
            raise UsageError(f"--rdzv-host: {e}") from None
    return gang.launch(hosts, cmd=cmd, nproc_per_node=nproc, port=port, rdzv_host=rdzv_host, code=code,
                       identity=identity, **launch_kw)


def _placed(fleet_name: str, *, gpus, gpu_type, min_vram_gib, identity, **launch_kw):
    from .. import fleetfile, placement
    from ..ops import place

    count = number("--gpus", gpus, 1, 64, integer=True, what="a number of GPUs (with --fleet)")
    req = placement.request(count, gpu_type, min_vram_gib)
    return place.launch(fleetfile.boxes(fleet_name), req, identity=identity, **launch_kw)


def status(gang_id, identity):
    from ..ops import gangview

    return gangview.status(gang_id, identity)


def logs(gang_id, *, tail, cursors, follow, timeout, max_bytes, sink, identity):
    from ..jobs import gangstore
    from ..ops import gangview

    if timeout is not None and not follow:
        raise UsageError("--timeout applies to --follow only (a page returns at once)")
    parsed = gangview.parse_cursors(cursors, gangstore.load(gang_id)) if cursors else None
    return gangview.logs(gang_id, tail=tail, cursors=parsed, follow=follow, timeout_s=timeout,
                         max_bytes=max_bytes or gangview.PAGE_BYTES, sink=sink, identity=identity)


def wait(gang_id, *, until, timeout, identity):
    from ..ops import gangview

    return gangview.wait(gang_id, until=until, timeout_s=timeout, identity=identity)


def stop(gang_id, *, grace, yes, plan, identity):
    from ..ops import gangview

    return gangview.stop(gang_id, grace=grace, yes=yes, plan=plan, identity=identity)


def retry(gang_id, *, resume_arg, env, secrets, identity):
    from ..ops import gang

    return gang.retry(gang_id, resume_arg=resume_arg, env=env, secrets=secrets, identity=identity)


def diagnose(gang_id, identity):
    from ..ops import gangview

    return gangview.diagnose(gang_id, identity)
