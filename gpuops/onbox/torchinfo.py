"""torch's version, the CUDA it was built for and the GPU architectures it carries kernels for.

torch is imported in a child interpreter under a deadline: a broken or slow install (seconds of
shared-library loading on a cold disk) must not hang or crash the probe. When the box's python3
cannot find torch at all (importlib's find_spec, in-process and cheap), nothing is started.
The child runs with -B so the import leaves no bytecode behind (the probe writes nothing).
"""

import json
import sys

from . import runcmd

TIMEOUT_S = 25

_CHILD = r"""
import json
out = {}
try:
    import torch
    out["version"] = torch.__version__
    out["cuda"] = getattr(torch.version, "cuda", None)
    flags = getattr(torch._C, "_cuda_getArchFlags", None)
    arch = flags() if flags else None
    out["arch_list"] = arch.split() if arch else []
except Exception as e:
    out["error"] = "%s: %s" % (type(e).__name__, str(e)[:300])
print(json.dumps(out))
"""


def begin():
    try:
        import importlib.util

        found = importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return None
    return runcmd.start([sys.executable, "-B", "-c", _CHILD], TIMEOUT_S)


def end(pending):
    """{installed, version, cuda, arch_list, error}."""
    if pending is None:
        return {"installed": False}
    r = runcmd.finish(pending)
    if r["error"]:
        return {"installed": True, "error": "import torch: %s after %ds" % (r["error"], TIMEOUT_S)
                if r["error"] == "timed out" else "import torch: %s" % r["error"]}
    try:
        doc = json.loads(r["out"].strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"installed": True, "error": "import torch: exit %s: %s" % (r["rc"], r["err"].strip()[-300:])}
    doc["installed"] = True
    return doc
