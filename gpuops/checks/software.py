"""The driver / CUDA / torch triangle (U28): does torch's build fit this driver and these GPUs?"""

import re

from ..findings import Finding

# CUDA versions PyTorch publishes wheel indexes for (download.pytorch.org/whl/cuXYZ).
WHEEL_CUDA = ((11, 8), (12, 1), (12, 4), (12, 6), (12, 8), (12, 9), (13, 0))


def version(text):
    m = re.match(r"(\d+)\.(\d+)", str(text or ""))
    return (int(m.group(1)), int(m.group(2))) if m else None


def wheel_for(driver_max):
    fits = [v for v in WHEEL_CUDA if v <= driver_max]
    return f"cu{fits[-1][0]}{fits[-1][1]}" if fits else None


def _arch_ok(cap, arch_list):
    """Kernels for sm_XY run on compute capability X.Z for Z >= Y; PTX (compute_XY) JIT-compiles upward."""
    major, minor = cap
    sm = compute = False
    for a in arch_list:
        m = re.match(r"(sm|compute)_(\d+?)(\d)[a-z]?$", a)
        if not m:
            continue
        a_major, a_minor = int(m.group(2)), int(m.group(3))
        if m.group(1) == "sm" and a_major == major and a_minor <= minor:
            sm = True
        if m.group(1) == "compute" and (a_major, a_minor) <= (major, minor):
            compute = True
    return "sm" if sm else ("ptx" if compute else None)


def torch_build(facts, t):
    torch = facts.get("torch") or {}
    g = facts.get("gpu") or {}
    if not torch.get("installed"):
        return [Finding("cuda.torch", "info", "torch is not installed for the box's python3: build checks skipped",
                        {"python": (facts.get("host") or {}).get("python_executable")},
                        "pip install torch   # or activate the run's environment in the login shell's rc file")]
    if torch.get("error"):
        return [Finding("cuda.torch", "warn", "torch is installed but does not import", {"error": torch["error"][:200]},
                        "python3 -c 'import torch'   # read the traceback; a mismatched CUDA library is typical", "U28")]
    out = []
    built = version(torch.get("cuda"))
    driver = version(g.get("cuda_max"))
    evidence = {"torch": torch.get("version"), "torch_cuda": torch.get("cuda"), "driver_cuda_max": g.get("cuda_max"),
                "driver": g.get("driver")}
    if g.get("devices") and built is None:
        out.append(Finding("cuda.torch", "fail", f"torch {torch.get('version')} is a CPU-only build on a GPU box",
                           evidence, f"pip install torch --index-url https://download.pytorch.org/whl/"
                           f"{wheel_for(driver) if driver else 'cu121'}", "U28"))
    elif built and driver and built > driver:
        wheel = wheel_for(driver)
        fix = (f"pip install torch --index-url https://download.pytorch.org/whl/{wheel}" if wheel
               else "the host driver is too old for any current torch wheel: re-rent a box with a newer driver")
        severity = "fail" if built[0] > driver[0] else "warn"
        note = "" if severity == "fail" else " (minor-version compatibility may carry it, PTX JIT will not)"
        out.append(Finding("cuda.torch", severity,
                           f"torch built for CUDA {torch.get('cuda')} but the driver supports up to {g.get('cuda_max')}{note}",
                           evidence, fix, "U28"))
    arch = torch.get("arch_list") or []
    caps = sorted({d["compute_cap"] for d in g.get("devices") or [] if version(d.get("compute_cap"))})
    for cap in caps:
        kind = _arch_ok(version(cap), arch)
        if arch and kind is None:
            out.append(Finding("cuda.arch", "fail",
                               f"torch has no kernels for compute capability {cap}: 'no kernel image is available'",
                               {"compute_cap": cap, "arch_list": " ".join(arch)},
                               "pip install --upgrade torch --index-url https://download.pytorch.org/whl/"
                               f"{wheel_for(driver) if driver else 'cu128'}   # newer GPUs need newer CUDA wheels", "U28"))
        elif kind == "ptx":
            out.append(Finding("cuda.arch", "warn", f"torch runs compute capability {cap} only through PTX JIT (slow start)",
                               {"compute_cap": cap, "arch_list": " ".join(arch)},
                               "install a torch build whose arch list has sm_" + cap.replace(".", ""), "U28"))
    if not out:
        out.append(Finding("cuda.torch", "ok", f"torch {torch.get('version')} (CUDA {torch.get('cuda')}) fits this driver "
                                               "and these GPUs", evidence))
    return out


CHECKS = (torch_build,)
