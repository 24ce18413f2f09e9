"""The facts probe: one JSON document describing the box. Observational only; writes nothing."""

import json
import sys
import time

from . import sysroot


def boot():
    uptime = sysroot.read("/proc/uptime")
    return {
        "boot_id": sysroot.read("/proc/sys/kernel/random/boot_id"),
        "uptime_s": float(uptime.split()[0]) if uptime else None,
        "now": time.time(),
    }


def main(argv):
    facts = {"probe_version": 1, "boot": boot()}
    sys.stdout.write(json.dumps(facts))
    return 0
