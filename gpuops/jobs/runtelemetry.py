"""What a job's telemetry series says, as findings diagnose and triage --job report: the box's
supervisor sampled the job's GPUs and processes every few seconds while it ran, and judged the
series there (gpuops.onbox.host.telemetry.judged); one snapshot never tells these apart (U21):

    telemetry.busy-wait   utilisation pinned near 100 % at near-idle power to the end: ranks
                          spinning in a stuck collective, a hang that looks busy (U21)
    telemetry.throttled   a GPU slowed for heat or a hardware brake during the run (U23)
    telemetry.starved     GPU memory held, GPUs mostly idle, CPUs saturated: the input pipeline
                          is the bottleneck (U24; U38 when the GPUs sat at about 0 %)

The judgements come from the box: their shape is checked here before anything is read from them.
"""

from ..boundary import expect, optional
from ..errors import BadAnswer
from ..findings import Finding
from ..onbox.host import telemetry

NUMBER = (int, float)
NONE = type(None)
_JUDGED = {"rows": int, "first_t": NUMBER + (NONE,), "last_t": NUMBER + (NONE,), "busy_wait": (dict, NONE),
           "throttled": (list, NONE), "starved": (dict, NONE)}
_BUSY = {"gpus": list, "since": NUMBER + (NONE,), "rows": (int, NONE), "evidence": (dict, NONE)}
_THROTTLE = {"gpu": (int, str, NONE), "reasons": list, "rows": (int, NONE), "of_rows": (int, NONE),
             "sm_min_mhz": NUMBER + (NONE,), "sm_max_mhz": NUMBER + (NONE,), "temp_max_c": NUMBER + (NONE,)}
_STARVED = {"gotcha": (str, NONE), "since": NUMBER + (NONE,), "evidence": dict}
_STARVED_EVIDENCE = {"gpu_util_mean": NUMBER, "cpu_mean_pct": NUMBER, "cpu_top_mean_pct": NUMBER, "cores": NUMBER}


def checked(doc, host: str):
    """The box's judgements once their shape is gpuops's (None stays None)."""
    if optional(doc, _JUDGED, host, "telemetry judgement") is None:
        return None
    if doc.get("busy_wait") is not None:
        expect(doc["busy_wait"], _BUSY, host, "busy-wait judgement")
    for t in doc.get("throttled") or []:
        expect(t if isinstance(t, dict) else {}, _THROTTLE, host, "throttle judgement")
        if not all(isinstance(r, str) for r in t["reasons"]):
            raise BadAnswer(f"{host}: the box's throttle judgement is not gpuops's: a reason is not a word")
    if doc.get("starved") is not None:
        expect(doc["starved"], _STARVED, host, "starvation judgement")
        expect(doc["starved"]["evidence"], _STARVED_EVIDENCE, host, "starvation judgement")
    return doc


def findings(doc):
    """The findings of checked judgements (none for None)."""
    if not doc:
        return []
    out = []
    busy = doc.get("busy_wait")
    if busy:
        gpus = ", ".join(str(g) for g in busy["gpus"])
        out.append(Finding(
            "telemetry.busy-wait", "warn", f"GPU {gpus} at ~100 % utilisation on near-idle power to the end of the "
            "series: ranks spinning in a stuck collective, not computing", dict(busy.get("evidence") or {},
                                                                                gpus=busy["gpus"], since=busy["since"]),
            "read each rank's stack (the stall evidence, or py-spy dump) for the collective it waits in; launch with "
            "--stall-after so the box stops and retries a hang on its own", gotcha="U21"))
    for t in doc.get("throttled") or []:
        out.append(Finding(
            "telemetry.throttled", "warn", f"GPU {t['gpu']} throttled ({', '.join(t['reasons'])}) in {t['rows']} of "
            f"{t['of_rows']} samples: it ran slower with no error anywhere", dict(t),
            "ask the provider about cooling and power, or rent another box; compare the step time before and during "
            "the throttle", gotcha="U23"))
    starved = doc.get("starved")
    if starved:
        ev = starved["evidence"]
        out.append(Finding(
            "telemetry.starved", "warn", f"GPUs at {ev['gpu_util_mean']:.0f} % while the CPUs ran at "
            f"{ev['cpu_mean_pct']:.0f} % of {ev['cores']:g} cores: the input pipeline is the bottleneck",
            dict(ev, since=starved["since"]), "more DataLoader workers (num_workers), pin_memory, data on local disk, "
            "or preprocessing done ahead of time",
            gotcha=telemetry.IDLE_GOTCHA if starved.get("gotcha") == telemetry.IDLE_GOTCHA else telemetry.STARVED_GOTCHA))
    return out
