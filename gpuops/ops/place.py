"""`launch --fleet F --gpus N`: ask the fleet (one round trip per box, gpuops.ops.fleet), place the
job by the pure rule (gpuops.placement), and launch it there pinned to the GPUs chosen. When
nothing fits, nothing is launched: exit 5 with what the fleet has."""

from .. import errors, placement
from ..envelope import CODE_KEY, envelope, step
from ..remote.targets import target_for
from . import fleet, jobs


def launch(boxes, req, *, window_s=fleet.DEFAULT_WINDOW_S, identity=None, **launch_kw):
    """The launch envelope of the job placed on the best box of `boxes`, with data.placement; or
    the refusal when no box fits."""
    view = fleet.inventory(boxes, window_s=window_s, identity=identity)
    chosen = placement.place(view["data"]["hosts"], req)
    shown = {"request": req, "host": chosen["host"], "gpus": chosen["gpus"],
             "boxes": [{k: v for k, v in b.items() if k != "gpu_states"} for b in chosen["boxes"]]}
    if chosen["host"] is None:
        # The answer is the reasons (data.placement): an outcome to read, exit 5, no error object.
        out = envelope("launch", ok=False, summary=chosen["summary"] + "; nothing was launched",
                       data={"placement": shown},
                       next=[step("gpuops", "fleet", "--host", ",".join(b.alias for b in boxes))])
        out[CODE_KEY] = errors.REFUSED
        return out
    target = target_for(chosen["host"], identity)
    try:
        doc = jobs.launch(target, gpus=",".join(map(str, chosen["gpus"])), **launch_kw)
    finally:
        target.close()
    doc["host"] = chosen["host"]
    doc["summary"] = f"{chosen['summary']}; {doc['summary']}"
    doc["data"]["placement"] = shown
    return doc
