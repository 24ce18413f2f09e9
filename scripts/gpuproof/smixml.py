"""`nvidia-smi -q -x` read into the GPU document gpuops' probe builds (gpuops.onbox.host.gpu), so the
proof can set the two side by side field by field and run gpuops' own GPU checks on both.

The XML is the driver's full report, a different code path in nvidia-smi from the CSV queries the
probe makes and from NVML's functions, and its tags moved between drivers (clocks_throttle_reasons
became clocks_event_reasons in 535/550; power_readings became gpu_power_readings). A tag neither
spelling finds gives None, which the comparison reports as "not in the report", never as a match.
"""

import re
import xml.etree.ElementTree as ET

# Mask bits of the clock-event (throttle) reasons, named by the XML's tag suffixes.
REASON_BITS = {
    "gpu_idle": 0x1, "applications_clocks_setting": 0x2, "sw_power_cap": 0x4, "hw_slowdown": 0x8,
    "sync_boost": 0x10, "sw_thermal_slowdown": 0x20, "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80, "display_clocks_setting": 0x100, "display_clock_setting": 0x100,
}
_NUMBER = re.compile(r"^\s*(-?[0-9]+(?:\.[0-9]+)?)")


def number(text):
    """The leading number of '81559 MiB', '34 C', '700.00 W'; None for 'N/A' and the like."""
    m = _NUMBER.match(text or "")
    return float(m.group(1)) if m else None


def _first(node, *paths):
    for path in paths:
        found = node.find(path)
        if found is not None and found.text is not None and found.text.strip():
            return found.text.strip()
    return None


def _yesno(text):
    if text is None or text in ("N/A", "Unknown Error"):
        return None
    return text.strip().lower() in ("yes", "active", "enabled")


def _mask(gpu):
    block = gpu.find("clocks_event_reasons")
    prefix = "clocks_event_reason_"
    if block is None:
        block, prefix = gpu.find("clocks_throttle_reasons"), "clocks_throttle_reason_"
    if block is None:
        return None
    mask, seen = 0, False
    for child in block:
        name = child.tag[len(prefix):] if child.tag.startswith(prefix) else child.tag
        bit = REASON_BITS.get(name)
        if bit is None or child.text is None:
            continue
        seen = True
        if child.text.strip() == "Active":
            mask |= bit
    return mask if seen else None


def _uncorrected_volatile(gpu):
    """Uncorrectable ECC errors since driver load: Hopper reports them per memory kind
    (sram_uncorrectable_parity, sram_uncorrectable_secded, dram_uncorrectable), older GPUs as
    double_bit/total."""
    volatile = gpu.find("ecc_errors/volatile")
    if volatile is None:
        return None
    total = number(_first(volatile, "double_bit/total"))
    if total is not None:
        return int(total)
    counts = [number(c.text) for c in volatile if "uncorrectable" in c.tag and c.text is not None]
    counts = [c for c in counts if c is not None]
    return int(sum(counts)) if counts else None


def _slowdown(gpu):
    """Absolute on older drivers; on drivers that report T.Limit offsets (580 on Hopper), the current
    temperature plus its distance to T.Limit, less slowdown's offset from T.Limit."""
    absolute = number(_first(gpu, "temperature/gpu_temp_slow_threshold"))
    if absolute is not None:
        return absolute
    parts = [number(_first(gpu, "temperature/" + tag)) for tag in
             ("gpu_temp", "gpu_temp_tlimit", "gpu_temp_slow_tlimit_threshold")]
    if any(v is None for v in parts):
        return None
    return parts[0] + parts[1] - parts[2]


def _process(p, bus_id):
    pid = number(_first(p, "pid"))
    return {"pid": int(pid) if pid is not None else None, "name": _first(p, "process_name"),
            "used_mib": number(_first(p, "used_memory")), "bus_id": bus_id, "type": _first(p, "type")}


def device(gpu, index):
    bus_id = _first(gpu, "pci/pci_bus_id") or gpu.get("id")
    minor = number(_first(gpu, "minor_number"))
    dbe = number(_first(gpu, "retired_pages/double_bit_retirement/retired_count"))
    return {
        "index": index, "uuid": _first(gpu, "uuid"), "name": _first(gpu, "product_name"), "bus_id": bus_id,
        "minor": int(minor) if minor is not None else None,
        "memory_total_mib": number(_first(gpu, "fb_memory_usage/total")),
        "memory_used_mib": number(_first(gpu, "fb_memory_usage/used")),
        "util_pct": number(_first(gpu, "utilization/gpu_util")),
        "temp_c": number(_first(gpu, "temperature/gpu_temp")),
        "slowdown_temp_c": _slowdown(gpu),
        "sm_clock_mhz": number(_first(gpu, "clocks/sm_clock")),
        "sm_clock_max_mhz": number(_first(gpu, "max_clocks/sm_clock")),
        "power_w": number(_first(gpu, "gpu_power_readings/power_draw", "gpu_power_readings/instant_power_draw",
                                 "power_readings/power_draw")),
        "power_limit_w": number(_first(gpu, "gpu_power_readings/current_power_limit",
                                       "power_readings/power_limit", "gpu_power_readings/enforced_power_limit")),
        "throttle_mask": _mask(gpu),
        "ecc_dbe_volatile": _uncorrected_volatile(gpu),
        "retired_pages_dbe": int(dbe) if dbe is not None else None,
        "retired_pages_pending": _yesno(_first(gpu, "retired_pages/pending_retirement")),
        "remap_failure": _yesno(_first(gpu, "remapped_rows/remapped_row_failure")),
        "remap_pending": _yesno(_first(gpu, "remapped_rows/remapped_row_pending")),
    }


def parse(text):
    """{source, driver, cuda_max, devices, processes} from `nvidia-smi -q -x`; ValueError when the
    text is not that report."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        raise ValueError("nvidia-smi -q -x did not print XML: %s" % e) from None
    if root.tag != "nvidia_smi_log":
        raise ValueError("nvidia-smi -q -x printed <%s>, not <nvidia_smi_log>" % root.tag)
    doc = {"source": "nvidia-smi -q -x", "driver": _first(root, "driver_version"),
           "cuda_max": _first(root, "cuda_version"), "devices": [], "processes": []}
    for index, gpu in enumerate(root.findall("gpu")):
        d = device(gpu, index)
        doc["devices"].append(d)
        doc["processes"].extend(_process(p, d["bus_id"]) for p in gpu.findall("processes/process_info"))
    return doc
