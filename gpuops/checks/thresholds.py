"""Every number a preflight verdict turns on, in one place, with the reason for its default.

A profile's `[preflight]` table overrides them by name (the profile loader calls `merged`); an
unknown name, a value of the wrong type, a negative value, nan or inf is a usage error, never silently
ignored.
"""

import math

from ..errors import UsageError

DEFAULTS = {
    # Directories a run writes to (home, working dir, profile data/checkpoint dirs): a
    # checkpoint that cannot be written kills the run at save time (U6). fail below.
    "disk_min_free_gib": 20.0,
    # Inodes run out before bytes with per-sample outputs and caches (U7). fail below either.
    "disk_min_free_inodes": 50000,
    "disk_min_free_inodes_pct": 2.0,
    # An extra --path of unknown use (a config or log dir as often as a data dir): fail below. A
    # profile's data/checkpoint dirs get disk_min_free_gib; `--path DIR:SIZE` sets its own floor.
    "path_min_free_gib": 1.0,
    # /tmp only holds scratch: warn below.
    "tmp_min_free_gib": 2.0,
    # DataLoader workers hand batches over through /dev/shm; Docker's default is 64 MiB. warn below.
    "shm_min_gib": 1.0,
    # Memory left under the cgroup limit (or on the host when there is none): warn below (U9).
    "mem_min_headroom_gib": 2.0,
    "mem_min_headroom_pct": 10.0,
    # The cgroup's OOM-kill counter above this: something here was already OOM-killed (U41).
    "oom_kills_max": 0,
    # Warn this close to the GPU's own slowdown temperature (U23)...
    "temp_margin_c": 5.0,
    # ...or at this temperature when the driver does not report a slowdown threshold (H100-class).
    "temp_warn_c": 83.0,
    # GPU memory in use that no listed process accounts for: warn above (U11).
    "gpu_orphan_mem_mib": 1024.0,
    # Retired pages for double-bit ECC errors at or above this: the card is worn out (DCGM's limit).
    "retired_pages_max": 63,
    # Uptime below this: the box rebooted recently; a run started before is gone (U3).
    "recent_boot_s": 900,
    # torchrun's default master port and the c10d rendezvous default.
    "rendezvous_ports": [29500, 29400],
}


def _number(name: str, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"preflight threshold {name!r} must be a number, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):  # nan slips past `< 0`; inf is no threshold
        raise UsageError(f"preflight threshold {name!r} must be a finite number, got {value!r}")
    if value < 0:
        raise UsageError(f"preflight threshold {name!r} must not be negative, got {value!r}")
    return value


def _ports(name: str, value):
    if not isinstance(value, (list, tuple)) or not all(
            isinstance(p, int) and not isinstance(p, bool) and 0 < p < 65536 for p in value):
        raise UsageError(f"preflight threshold {name!r} must be a list of TCP ports, got {value!r}")
    return list(value)


def merged(overrides=None) -> dict:
    """DEFAULTS with `overrides` applied; UsageError names the first bad key."""
    out = {k: (list(v) if isinstance(v, list) else v) for k, v in DEFAULTS.items()}
    for name, value in (overrides or {}).items():
        if name not in DEFAULTS:
            known = ", ".join(sorted(DEFAULTS))
            raise UsageError(f"unknown preflight threshold {name!r} (known: {known})")
        out[name] = _ports(name, value) if isinstance(DEFAULTS[name], list) else _number(name, value)
    return out
