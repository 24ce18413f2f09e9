"""A kept run's launch request (issue 36), as both faces ask for it, checked once.

`gpuops launch --fleet F --vault DIR` (gpuops.cli.jobs), fleet_launch and gang_launch with `vault`
(gpuops.mcp) take the same keeper fields: each face turns its own syntax into values (a flag's text
into a number, a tool's typed arguments; the server's roots first) and `spec` judges them, in one
order and in the CLI's words, which the server rewords into the tool's parameters (gpuops.mcp.words).
So a kept launch asked wrongly is refused the same way on both, before anything starts.
"""

from .. import errors

DROPPED = "a run kept with --vault is relaunched without it"


def asked(vault, keeping: dict) -> bool:
    """Whether the launch is a kept run's: a vault, or any keeper field (which then needs one)."""
    return bool(vault) or any(v for k, v in keeping.items() if k != "budget_usd") or \
        keeping.get("budget_usd") is not None


def gang_of(hosts: list, cmd: str, nproc_per_node: int, rdzv_port: int, nnodes, max_restarts) -> dict:
    """The gang part of a kept run's spec (its first boxes, in node order), checked as `launch
    --torchrun` checks a gang: the boxes once each, torchrun's command, --nnodes MIN:MAX about them."""
    from ..ops import gang as gangop

    hosts = list(hosts or ())
    gangop.check_request(hosts, cmd, nproc_per_node)
    return {"hosts": hosts, "nproc_per_node": nproc_per_node, "rdzv_port": rdzv_port, "max_restarts": max_restarts,
            "nnodes": gangop.elastic_nnodes(nnodes, len(hosts)) if nnodes else None}


def spec(*, vault, fleet, cmd, policy, keeping: dict, gpus=None, gpu_type=None, min_vram_gib=None, gang=None,
         hosts=(), script=None, engine=None, profile=None, secrets=None, dropped=None, name=None, env=None,
         workdir=None, jobs_dir=None) -> dict:
    """The keeper's spec (gpuops.keeper.start.spec_of) of a kept run, or a UsageError. `keeping`:
    lost_after_s, stop_when_done, outputs, budget_usd, stop_idle_s; `gang` (a torchrun gang):
    gang_of()'s arguments but its first boxes, which are `hosts`; `dropped`: {flag: value} of what
    a relaunch would not carry (any set is refused). `gpus` is how many GPUs a box needs (a gang's
    node: its nproc_per_node unless given)."""
    from .. import placement
    from . import start

    for flag, value in (dropped or {}).items():
        if value:
            raise errors.UsageError(f"{flag} does not apply here: {DROPPED}")
    if not vault:
        raise errors.UsageError("--lost-after, --stop-when-done, --stop-idle, --budget, --output and --keeper-host go with "
                                "--vault DIR")
    if not fleet or bool(hosts) != (gang is not None) or script or engine:
        raise errors.UsageError("--vault keeps a run across the boxes of a --fleet: give --fleet and --cmd (and with "
                                "--torchrun, the gang's first boxes in --host; not --script or --engine)")
    if profile is not None or secrets:
        raise errors.UsageError("--vault: a relaunch carries no --profile or --secret-env (they are not kept off the box)")
    if gang is not None:
        gang = gang_of(hosts, cmd, **gang)
    wanted = gpus if gpus is not None else gang["nproc_per_node"] if gang else 1
    return start.spec_of(command=cmd, fleet=fleet, vault_dir=vault, policy=policy,
                         request=placement.request(wanted, gpu_type, min_vram_gib), **keeping, name=name, env=env,
                         workdir=workdir, jobs_dir=jobs_dir, gang=gang)
