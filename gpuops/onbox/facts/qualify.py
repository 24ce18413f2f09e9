"""Measure the box for `preflight --qualify`: what each GPU computes and moves, and what the run's
disks read and write, in about a minute. Entry: main(argv); one JSON document on stdout.

    python3 qualify.py [--path ROLE=DIR]... [--budget S] [--disk-mib N]

    {"seconds", "torch": {version, cuda, nccl, error}, "gpus": [{index, name, matmul_tflops: {dtype: TF},
     memory_gbps, h2d_gbps, d2h_gbps, link_under_load: {gen, width}}], "peers": [{src, dst, gbps, p2p}],
     "allreduce": {gpus, bytes, busbw_gbps}, "disks": [{role, path, bytes, write_mbps, read_mbps, cached}],
     "not_measured": [{what, why}]}

GPU figures need torch with CUDA, imported here only if the box has it; without it each GPU figure
is listed under not_measured with the reason, and the disks are still measured. Every timing
brackets the work with torch.cuda.synchronize() and repeats it until MIN_TIMED_S has passed, after
one untimed warm-up (the first call pays for kernel selection and clock ramp-up). The link is
read with nvidia-smi while host-to-device copies run, since it downshifts when the GPU idles.

The disk test writes one file it creates (mkstemp: a new name, O_EXCL, mode 0600) in each
directory, fsyncs it, asks the kernel to drop its cached pages, reads it back, and removes it in a
finally: nothing else is touched, and it is skipped where free space is short. A run killed in the
middle (its deadline) leaves that one file, named .gpuops-qualify-*, behind.
"""

import json
import os
import sys
import tempfile
import time

from ..host import runcmd

MIN_TIMED_S = 0.4
DEFAULT_BUDGET_S = 60.0
DEFAULT_DISK_MIB = 256
MAX_DISK_MIB = 4096
CHUNK = 8 << 20
MATMUL_N = 8192
MEMORY_BYTES = 1 << 30  # per buffer of the device copy: far past any cache
COPY_BYTES = 256 << 20  # host and peer copies
ALLREDUCE_FLOATS = 64 << 20  # 256 MiB per GPU
MAX_PEER_GPUS = 8
DTYPES = ("float32", "tf32", "bfloat16", "float16")


def _args(argv):
    paths, budget, disk_mib, i = [], DEFAULT_BUDGET_S, DEFAULT_DISK_MIB, 0
    while i < len(argv):
        flag, value = argv[i], argv[i + 1] if i + 1 < len(argv) else ""
        if flag == "--path" and "=" in value:
            paths.append(tuple(value.split("=", 1)))
        elif flag == "--budget":
            budget = min(600.0, max(5.0, float(value)))
        elif flag == "--disk-mib":
            disk_mib = min(MAX_DISK_MIB, max(8, int(value)))
        i += 2
    return paths, budget, disk_mib


class Clock(object):
    def __init__(self, budget) -> None:
        self.deadline = time.time() + budget

    def left(self):
        return self.deadline - time.time()


def timed(fn, sync, min_s=None):
    """(seconds per call, calls) of fn() after one untimed call, repeated until min_s (MIN_TIMED_S)
    has passed."""
    min_s = MIN_TIMED_S if min_s is None else min_s
    fn()
    sync()
    calls, t0 = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        sync()
        spent = time.perf_counter() - t0
        if spent >= min_s or calls >= 1000:
            return spent / calls, calls


# ------------------------------------------------------------------------------------------ disk

def _drop_cache(fd) -> bool:
    advise = getattr(os, "posix_fadvise", None)
    if advise is None:
        return False
    try:
        advise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return True
    except OSError:
        return False


def disk(role, path, mib):
    out = {"role": role, "path": path, "bytes": None, "write_mbps": None, "read_mbps": None, "cached": None,
           "error": None}
    where = os.path.expanduser(path)
    try:
        st = os.statvfs(where)
    except OSError as e:
        out["error"] = "cannot stat: %s" % (e.strerror or e)
        return out
    size = mib << 20
    if st.f_bavail * st.f_frsize < 4 * size + (1 << 30):
        out["error"] = "not measured: under %d MiB free" % (4 * mib + 1024)
        return out
    block = os.urandom(CHUNK)  # not zeros: a compressing filesystem would write next to nothing
    try:
        fd, name = tempfile.mkstemp(prefix=".gpuops-qualify-", dir=where)
    except OSError as e:
        out["error"] = "cannot create a file: %s" % (e.strerror or e)
        return out
    try:
        t0 = time.perf_counter()
        left = size
        while left > 0:
            left -= os.write(fd, block[:min(CHUNK, left)])
        os.fsync(fd)
        wrote = time.perf_counter() - t0
        out["cached"] = not _drop_cache(fd)
        os.lseek(fd, 0, os.SEEK_SET)
        t0 = time.perf_counter()
        while os.read(fd, CHUNK):
            pass
        read = time.perf_counter() - t0
        out.update(bytes=size, write_mbps=round(size / wrote / 1e6, 1), read_mbps=round(size / read / 1e6, 1))
    except OSError as e:
        out["error"] = "%s" % (e.strerror or e)
    finally:
        os.close(fd)
        os.unlink(name)  # the file mkstemp made for this run, and nothing else
    return out


# ------------------------------------------------------------------------------------------- GPU

def _torch():
    """(torch, None) when torch sees a CUDA device, else (None, why)."""
    try:
        import torch
    except Exception as e:  # absent or broken: the disks are still measured
        return None, "torch cannot be imported here (%s)" % type(e).__name__
    try:
        if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
            return None, "torch %s sees no CUDA device" % torch.__version__
    except Exception as e:
        return None, "torch's CUDA does not start: %s" % str(e)[:200]
    return torch, None


def syncer(torch, *devices):
    """What waits for the work queued on `devices` (a CPU device needs no wait)."""
    gpus = [torch.device(d) for d in devices if torch.device(d).type == "cuda"]

    def sync() -> None:
        for d in gpus:
            torch.cuda.synchronize(d)

    return sync


def matmul(torch, dev, dtype, n=None):
    """Dense matmul TFLOPS of an n x n by n x n product in `dtype` ('tf32' is float32 on tensor cores)."""
    n = n or MATMUL_N
    kind = torch.float32 if dtype in ("float32", "tf32") else getattr(torch, dtype)
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    try:
        a = torch.randn(n, n, device=dev, dtype=kind)
        b = torch.randn(n, n, device=dev, dtype=kind)
        c = torch.empty(n, n, device=dev, dtype=kind)
        per, _ = timed(lambda: torch.matmul(a, b, out=c), syncer(torch, dev))
        return round(2.0 * n ** 3 / per / 1e12, 1)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def memory_bandwidth(torch, dev, n=None):
    """GB/s of a device-to-device copy of n bytes, counting the read and the write."""
    n = n or MEMORY_BYTES
    src = torch.empty(n, dtype=torch.uint8, device=dev)
    dst = torch.empty(n, dtype=torch.uint8, device=dev)
    per, _ = timed(lambda: dst.copy_(src), syncer(torch, dev))
    return round(2.0 * n / per / 1e9, 1)


def _link_query():
    return runcmd.start(["nvidia-smi", "--query-gpu=index,pcie.link.gen.current,pcie.link.width.current",
                         "--format=csv,noheader,nounits"], 10)


def _link_read(pending, index):
    r = runcmd.finish(pending)
    for line in r["out"].splitlines() if r["error"] is None and r["rc"] == 0 else []:
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == 3 and cells[0] == str(index) and cells[1].isdigit() and cells[2].isdigit():
            return {"gen": int(cells[1]), "width": int(cells[2])}
    return None


def host_copies(torch, dev, index, n=None, pinned=True):
    """(H2D GB/s, D2H GB/s, the link as nvidia-smi read it during the H2D copies) with pinned memory."""
    n = n or COPY_BYTES
    host = torch.empty(n, dtype=torch.uint8)
    host = host.pin_memory() if pinned else host
    gpu = torch.empty(n, dtype=torch.uint8, device=dev)
    sync = syncer(torch, dev)
    gpu.copy_(host, non_blocking=True)
    sync()
    pending = _link_query()  # read while the copies below keep the link busy
    h2d, _ = timed(lambda: gpu.copy_(host, non_blocking=True), sync, min_s=max(MIN_TIMED_S, 0.8))
    link = _link_read(pending, index)
    d2h, _ = timed(lambda: host.copy_(gpu, non_blocking=True), sync)
    return round(n / h2d / 1e9, 1), round(n / d2h / 1e9, 1), link


def peer(torch, src, dst, n=None):
    """GB/s of a copy from device `src` to device `dst`."""
    n = n or COPY_BYTES
    a = torch.empty(n, dtype=torch.uint8, device=src)
    b = torch.empty(n, dtype=torch.uint8, device=dst)
    per, _ = timed(lambda: b.copy_(a), syncer(torch, src, dst))
    return round(n / per / 1e9, 1)


def allreduce(torch, count: int):
    """NCCL all-reduce bus bandwidth across `count` GPUs from this one process (torch.cuda.nccl):
    algorithm bandwidth x 2(n-1)/n, as nccl-tests reports it."""
    n = ALLREDUCE_FLOATS
    tensors = [torch.ones(n, dtype=torch.float32, device="cuda:%d" % i) for i in range(count)]
    per, _ = timed(lambda: torch.cuda.nccl.all_reduce(tensors), syncer(torch, *["cuda:%d" % i for i in range(count)]))
    alg = 4.0 * n / per / 1e9
    return {"gpus": count, "bytes": 4 * n, "busbw_gbps": round(alg * 2.0 * (count - 1) / count, 1)}


def gpus(doc, clock) -> None:
    torch, why = _torch()
    if torch is None:
        doc["not_measured"].append({"what": "GPU: matmul, memory, host copies, peers, all-reduce", "why": why})
        doc["torch"]["error"] = why
        return
    doc["torch"].update(version=torch.__version__, cuda=getattr(torch.version, "cuda", None))
    try:
        v = torch.cuda.nccl.version()  # (2, 28, 9) in recent torch, 22809 in older ones
        doc["torch"]["nccl"] = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
    except Exception:  # a build without NCCL
        doc["torch"]["nccl"] = None
    count = torch.cuda.device_count()

    def step(what, fn):
        if clock.left() < 2:
            doc["not_measured"].append({"what": what, "why": "the time budget ran out"})
            return None
        try:
            return fn()
        except Exception as e:  # one measurement that breaks (out of memory, a dtype this GPU lacks) is its own
            doc["not_measured"].append({"what": what, "why": "%s: %s" % (type(e).__name__, str(e)[:200])})
            return None
        finally:
            torch.cuda.empty_cache()

    for i in range(count):
        dev = torch.device("cuda", i)
        g = {"index": i, "name": torch.cuda.get_device_name(i), "matmul_tflops": {}}
        doc["gpus"].append(g)
        for dtype in DTYPES:
            value = step("GPU %d matmul %s" % (i, dtype), lambda: matmul(torch, dev, dtype))
            if value is not None:
                g["matmul_tflops"][dtype] = value
        g["memory_gbps"] = step("GPU %d memory bandwidth" % i, lambda: memory_bandwidth(torch, dev))
        copies = step("GPU %d host copies" % i, lambda: host_copies(torch, dev, i))
        g["h2d_gbps"], g["d2h_gbps"], g["link_under_load"] = copies or (None, None, None)
    shown = min(count, MAX_PEER_GPUS)
    for s in range(shown):
        for d in range(shown):
            if s != d:
                p2p = bool(torch.cuda.can_device_access_peer(s, d))
                gbps = step("peer GPU %d -> GPU %d" % (s, d), lambda: peer(torch, "cuda:%d" % s, "cuda:%d" % d))
                if gbps is not None:
                    doc["peers"].append({"src": s, "dst": d, "gbps": gbps, "p2p": p2p})
    if count > 1:
        doc["allreduce"] = step("all-reduce across %d GPUs" % count, lambda: allreduce(torch, count))


def main(argv) -> int:
    sys.dont_write_bytecode = True
    started = time.time()
    paths, budget, disk_mib = _args(argv)
    clock = Clock(budget)
    doc = {"torch": {"version": None, "cuda": None, "nccl": None, "error": None}, "gpus": [], "peers": [],
           "allreduce": None, "disks": [], "not_measured": []}
    for role, path in paths or [("home", "~")]:
        doc["disks"].append(disk(role, path, disk_mib))
    gpus(doc, clock)
    doc["seconds"] = round(time.time() - started, 2)
    sys.stdout.write(json.dumps(doc))
    sys.stdout.flush()
    return 0
