"""torch's version, the CUDA it was built for and the GPU architectures it carries kernels for.

torch is imported in a child interpreter under a deadline: a broken or slow install (seconds of
shared-library loading on a cold disk) must not hang or crash the probe. When the box's python3
cannot find torch at all (importlib's find_spec, in-process and cheap), nothing is started.
The child runs with -B so the import leaves no bytecode behind (the probe writes nothing).

That import costs 1-3 s on every preflight of a box with torch, for facts that change only when
torch is reinstalled. So each answer carries a key (the interpreter, and the inode, size and
mtime of torch's version.py, which every install rewrites); a caller that kept the facts of that
key names it, and while it still holds nothing is imported (gpuops.probecache keeps them).
"""

import json
import os
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
try:  # the NCCL torch loads: (2, 28, 9) in recent torch, 22809 in older; a CPU build has none
    v = torch.cuda.nccl.version()
    out["nccl"] = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
except Exception:
    pass
print(json.dumps(out))
"""


def _key(spec):
    """Names this install of torch for this interpreter; None when version.py cannot be read."""
    try:
        st = os.stat(os.path.join(os.path.dirname(spec.origin), "version.py"))
    except (OSError, TypeError):
        return None
    return "%s:%d:%d:%d" % (sys.executable, st.st_ino, st.st_size, st.st_mtime_ns)


def begin(known=None):
    """What end() needs: None (no torch), ("known", key) when `known` still names this install,
    else the import's child and the key."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return None
    key = _key(spec)
    if known and key == known:
        return ("known", key)
    return ("child", key, runcmd.start([sys.executable, "-B", "-c", _CHILD], TIMEOUT_S))


def end(pending):
    """{installed, version, cuda, arch_list, error, key}, or {installed, key, known: true} when the
    caller's facts for this install still hold."""
    if pending is None:
        return {"installed": False}
    if pending[0] == "known":
        return {"installed": True, "key": pending[1], "known": True}
    _, key, child = pending
    r = runcmd.finish(child)
    if r["error"]:
        return {"installed": True, "error": "import torch: %s after %ds" % (r["error"], TIMEOUT_S)
                if r["error"] == "timed out" else "import torch: %s" % r["error"]}
    try:
        doc = json.loads(r["out"].strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"installed": True, "error": "import torch: exit %s: %s" % (r["rc"], r["err"].strip()[-300:])}
    doc["installed"] = True
    if key and not doc.get("error"):
        doc["key"] = key
    return doc
