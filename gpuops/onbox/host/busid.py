"""One spelling for a GPU's PCI address, whoever printed it.

The same GPU is `00000000:3B:00.0` to nvidia-smi and NVML (8-digit domain, upper case, function),
`0000:3b:00.0` under /proc/driver/nvidia/gpus, and `0000:3b:00` or `PCI:0000:3b:00` in the kernel
log's Xid lines (no function). `key()` maps all of them to `0000:3b:00`: domain as four hex
digits, bus and device as two, lower case, function dropped (a GPU is function 0). Stdlib only, as
everything shipped to the box.
"""

import re

_ADDRESS = re.compile(r"([0-9a-fA-F]{1,8}):([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})(?:\.([0-7]))?")


def key(text):
    """'0000:3b:00' for any spelling of a PCI address in `text`; None when there is none."""
    if isinstance(text, bytes):
        text = text.decode("ascii", "replace")
    m = _ADDRESS.search(text or "")
    if not m:
        return None
    return "%04x:%02x:%02x" % (int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16))


def proc_name(text: str):
    """The directory name under /proc/driver/nvidia/gpus/ ('0000:3b:00.0'), or None."""
    k = key(text)
    if k is None:
        return None
    m = _ADDRESS.search(text if isinstance(text, str) else text.decode("ascii", "replace"))
    return "%s.%s" % (k, m.group(4) or "0")
