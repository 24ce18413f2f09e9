"""GPU verdicts: is a GPU visible, is it throttling or running hot, is its memory failing, and is
its memory held by something nobody can see."""

import re

from ..findings import Finding
from ..onbox.host import busid

# Clock-event (throttle) reason bits, identical in NVML and nvidia-smi's active mask.
HW_SLOWDOWN = 0x8
SW_THERMAL = 0x20
HW_THERMAL = 0x40
HW_POWER_BRAKE = 0x80
HW_REASONS = {HW_SLOWDOWN: "hw_slowdown", HW_THERMAL: "hw_thermal_slowdown", HW_POWER_BRAKE: "hw_power_brake"}

RERENT = ("nvidia-smi -q -d PERFORMANCE,ECC   # to confirm; a tenant cannot repair cooling, power delivery or "
          "GPU memory: stop this instance and rent another box")


def device_for_bus(devices, bus_id):
    key = busid.key(bus_id)
    return next((d for d in devices if key is not None and busid.key(d.get("bus_id")) == key), None)


def label(d):
    return f"GPU {d.get('index')}" + (f" ({d['bus_id']})" if d.get("bus_id") else "")


def _devices(facts):
    return ((facts.get("gpu") or {}).get("devices")) or []


def visible(facts, t):
    g = facts.get("gpu")
    if g is None:
        return [Finding("gpu.none", "fail", "GPU facts missing: the probe could not look",
                        {"probe_error": (facts.get("errors") or {}).get("gpu")},
                        "re-run with GPUOPS_DEBUG=1 and report the probe error")]
    devices = g.get("devices") or []
    if not devices:
        env = facts.get("env") or {}
        evidence = {"source": g.get("source"), "nvidia_smi": g.get("error"), "nvml": g.get("nvml"),
                    "device_nodes": len(g.get("device_nodes") or []), "kernel_module": g.get("kernel_module")}
        cvd = env.get("CUDA_VISIBLE_DEVICES")
        if cvd is not None:
            evidence["CUDA_VISIBLE_DEVICES"] = cvd
        if cvd is not None and cvd.strip() in ("", "-1", "none", "void"):
            fix = "unset CUDA_VISIBLE_DEVICES   # an empty or -1 value hides every GPU from CUDA"
        elif g.get("kernel_module") and not g.get("device_nodes"):
            fix = ("docker run --gpus all ...   # the host has the NVIDIA driver but this container got no GPU: "
                   "recreate it with GPUs (NVIDIA Container Toolkit >= 1.14)")
        else:  # no driver module and no device node: nothing on this machine brings a GPU back
            fix = ("gpuops preflight --host BOX   # no NVIDIA driver or GPU here (no nvidia module, no /dev/nvidia*): "
                   "name the GPU box you rented; if this is it, rent an instance type that has GPUs")
        return [Finding("gpu.none", "fail", "No GPU visible: training would silently run on the CPU",
                        evidence, fix, "U31")]
    out = []
    for d in devices:
        if d.get("name") is None and d.get("bus_id") is None:
            why = "; ".join(f"{k}: {v}" for k, v in (d.get("unavailable") or {}).items())
            out.append(Finding("gpu.unreadable", "fail", f"GPU {d.get('index')} does not answer the driver",
                               {"gpu": d.get("index"), "why": why[:200]}, RERENT, "U22"))
    names = sorted({d.get("name") or "?" for d in devices})
    out.append(Finding("gpu.none", "ok", f"{len(devices)} GPU(s) visible: {', '.join(names)}",
                       {"count": len(devices), "driver": g.get("driver"), "cuda_max": g.get("cuda_max"),
                        "source": g.get("source")}))
    return out


def _per_gpu(facts, fid, judge, ok_title):
    """judge(device) -> findings, or None when that GPU lacks the facts; one ok finding if all pass."""
    out, judged = [], 0
    for d in _devices(facts):
        verdict = judge(d)
        if verdict is None:
            continue
        judged += 1
        out += verdict
    if judged and not out:
        out.append(Finding(fid, "ok", ok_title.format(n=judged), {"gpus": judged}))
    return out


def throttle(facts, t):
    def judge(d):
        mask = d.get("throttle_mask")
        if mask is None:
            return None
        evidence = {"gpu": d.get("index"), "mask": hex(mask), "temp_c": d.get("temp_c"),
                    "sm_clock_mhz": d.get("sm_clock_mhz"), "sm_clock_max_mhz": d.get("sm_clock_max_mhz"),
                    "power_w": d.get("power_w"), "power_limit_w": d.get("power_limit_w")}
        hw = [name for bit, name in HW_REASONS.items() if mask & bit]
        if hw:
            evidence["reasons"] = ",".join(hw)
            return [Finding("gpu.throttle", "fail",
                            f"{label(d)} is in hardware slowdown ({', '.join(hw)}): clocks cut 2x or more",
                            evidence, RERENT, "U23")]
        if mask & SW_THERMAL:
            evidence["reasons"] = "sw_thermal_slowdown"
            return [Finding("gpu.throttle", "warn", f"{label(d)} is thermally throttled by the driver",
                            evidence, "nvidia-smi -q -d PERFORMANCE,TEMPERATURE   # if it persists under load, "
                            "re-rent: cooling is outside a tenant's control", "U23")]
        return []

    return _per_gpu(facts, "gpu.throttle", judge, "no hardware or thermal slowdown on {n} GPU(s)")


def _distance(temp, slow) -> str:
    if slow is None:
        return "hot enough to throttle"
    if temp >= slow:
        return f"{temp - slow:g} C past its slowdown point"
    return f"{slow - temp:g} C from its slowdown point"


def temperature(facts, t):
    def judge(d):
        temp = d.get("temp_c")
        if temp is None:
            return None
        slow = d.get("slowdown_temp_c")
        limit = slow - t["temp_margin_c"] if slow is not None else t["temp_warn_c"]
        if temp < limit:
            return []
        return [Finding(
            "gpu.temperature", "warn",
            f"{label(d)} at {temp:g} C, " + _distance(temp, slow),
            {"gpu": d.get("index"), "temp_c": temp, "slowdown_temp_c": slow, "warn_at_c": limit},
            "nvidia-smi --query-gpu=temperature.gpu,clocks.sm --format=csv -l 5   # if it stays this hot "
            "under load, the clocks drop: re-rent", "U23")]

    return _per_gpu(facts, "gpu.temperature", judge, "{n} GPU(s) clear of their slowdown temperature")


MEMORY_ERROR_KEYS = ("ecc_dbe_volatile", "retired_pages_dbe", "retired_pages_pending", "remap_failure", "remap_pending")


def memory_errors(facts, t):
    def judge(d):
        values = {k: d.get(k) for k in MEMORY_ERROR_KEYS}
        if all(v is None for v in values.values()):
            return None
        evidence = {"gpu": d.get("index"), **{k: v for k, v in values.items() if v is not None}}
        if (values["ecc_dbe_volatile"] or 0) > 0 or values["remap_failure"]:
            what = "uncorrectable ECC errors since driver load" if (values["ecc_dbe_volatile"] or 0) > 0 \
                else "a row-remap failure"
            return [Finding("gpu.ecc", "fail", f"{label(d)} has {what}: its memory is failing", evidence, RERENT, "U22")]
        if (values["retired_pages_dbe"] or 0) >= t["retired_pages_max"]:
            return [Finding("gpu.ecc", "fail", f"{label(d)} has retired {values['retired_pages_dbe']} pages",
                            evidence, RERENT, "U22")]
        if values["retired_pages_pending"] or values["remap_pending"]:
            return [Finding("gpu.ecc", "warn", f"{label(d)} has a memory repair pending until a GPU reset",
                            evidence, "nvidia-smi -r   # needs root on the host: ask the provider for a GPU reset, "
                            "or re-rent", "U22")]
        return []

    return _per_gpu(facts, "gpu.ecc", judge, "no uncorrectable memory errors on {n} GPU(s)")


def _holds_gpu(holder, minor):
    """Holds /dev/nvidia<minor>, or any per-GPU node when the minor number is unknown."""
    devices = holder.get("devices") or []
    if minor is not None:
        return f"/dev/nvidia{minor}" in devices
    return any(re.fullmatch(r"/dev/nvidia\d+", dev) for dev in devices)


def orphan_memory(facts, t):
    g = facts.get("gpu") or {}

    def judge(d):
        used = d.get("memory_used_mib")
        if used is None:
            return None
        key = busid.key(d.get("bus_id"))
        listed = [p for p in g.get("processes") or [] if busid.key(p.get("bus_id")) == key]
        if listed or used <= t["gpu_orphan_mem_mib"]:
            return []
        mine = [h for h in g.get("holders") or [] if _holds_gpu(h, d.get("minor"))][:8]
        evidence = {"gpu": d.get("index"), "used_mib": round(used), "listed_processes": 0,
                    "holders": ", ".join(f"{h['pid']}({h.get('comm')})" for h in mine) or "none visible"}
        if mine:
            fix = (f"fuser -v /dev/nvidia*; kill {' '.join(str(h['pid']) for h in mine)}   # they hold the GPU "
                   "but NVML lists none; stop them unless they are yours to keep")
        else:
            fix = ("fuser -v /dev/nvidia*   # on the host: the holder is outside this container (or a dead one); "
                   "restart the container or ask the provider")
        return [Finding("gpu.orphan-memory", "warn", f"{label(d)} has {used:.0f} MiB in use but no process is listed on it",
                        evidence, fix, "U11")]

    return _per_gpu(facts, "gpu.orphan-memory", judge, "GPU memory on {n} GPU(s) is accounted for")


CHECKS = (visible, throttle, temperature, memory_errors, orphan_memory)
