"""How fast `gpuops triage` reads a big job log, against grep -cE over the same signatures.

    python3 benchmarks/triage.py [--size-mb 64] [--runs 3] [--keep DIR]

Writes a realistic multi-node log of --size-mb (8 nodes under srun -l, RAY=1: NCCL init chatter,
absl lines, Ray worker lines, a step line per node per step, the harmless probes every job
prints, tqdm bars with bare CRs, and at the end an OOM-kill cascade with a JOB SUMMARY), and a
tiny log. Then, best of --runs, interleaved:

  startup     `gpuops triage --log TINY --json`: interpreter, CLI and imports
  triage      `gpuops triage --log BIG --json` (default engine: grep prefilter for big files)
  triage/re   the same with GPUOPS_TRIAGE_ENGINE=python (the fallback when grep is missing)
  grep -cE    grep -acE with every signature the scan looks for, LC_ALL=C, on BIG

  on-box     the box's own classifier (gpuops.onbox.triage.logclass, what the job's supervisor runs
             after a failed attempt): its bundle under `python3 -S`, as an exec channel ships it,
             reading the head, step lines and tail that `triage --job` reads, on BIG

Prints (triage - startup) / grep, target <= 5x; the start-up time; and the peak RSS of the big
run (target < 200 MB; try --size-mb 1024 to see that it does not grow with the log); and the
on-box classification against the workstation's triage of the same log, with both verdicts.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpuops import onbox  # noqa: E402
from gpuops.remote import wrap  # noqa: E402
from gpuops.onbox.triage.matcher import grep_patterns  # noqa: E402

NODES = 8


def write_log(path, size):
    """A MaxText-on-Slurm style log of about `size` bytes that ends in a failure cascade."""
    rnd = random.Random(20250302)
    hosts = [f"gpu-h{i:02d}" for i in range(NODES)]
    t = 1740909600.0  # 2025-03-02 10:00:00 UTC
    out = open(path, "wb")
    head = [
        f"== Job 9123 on {NODES} nodes: {','.join(hosts)}", "SLURM_JOB_ID=9123", "RAY=1",
        "PASSTHROUGH_ARGS=steps=400000 enable_checkpointing=true per_device_batch_size=4 remat_policy=full",
        "STAGE_TIMEOUTS=preflight:900,pull:1200,train:604800",
        "[2025-03-02 10:00:00] == Preflight START", "[2025-03-02 10:00:20] == Preflight OK",
        "[2025-03-02 10:00:21] == Docker pull START", "[2025-03-02 10:01:00] == Docker pull OK",
        "[Ray] HEAD started on gpu-h00:6379", "[Prometheus] Started on port 9190",
        "ssh -L 8265:gpu-h00:8265 -L 9190:gpu-h00:9190 -L 6006:gpu-h00:6006 -J me@login.example.org me@gpu-h00",
    ]
    for n in range(NODES):
        head += [f"{n}: E0302 10:01:05.000000 140001 cuda_executor.cc:1001] Failed call to cuInit: UNKNOWN ERROR (303)",
                 f"{n}: W0302 10:01:05.100000 140001 topology.cc:55] Cannot read CPU core 97 (topology.cc)",
                 f"{n}: {hosts[n]}:2001:2001 [0] NCCL WARN MSCCL++: Feature not enabled"]
        head += [f"{n}: {hosts[n]}:2001:2001 [{g}] NCCL INFO Channel {c:02d}/32 :    0   1   2   3   4   5   6   7"
                 for g in range(8) for c in range(8)]
        head += [f"{n}: Config param checkpoint_period: 1000"]
    head.append("[2025-03-02 10:02:00] == Training START")
    out.write(("\n".join(head) + "\n").encode())
    written, step = out.tell(), 0
    stamp = time.strftime
    while written < size:
        block = []
        for _ in range(50):
            secs = 2.0 + rnd.random() * 0.2
            t += secs
            for n in range(NODES):
                block.append(f"{n}: completed step: {step}, seconds: {secs:.3f}, TFLOP/s/device: {400 + rnd.random():.3f}, "
                             f"Tokens/s/device: {8000 + rnd.random():.3f}, total_weights: 524288, loss: {2.5 - step * 1e-6:.4f}")
            clock = stamp("%H:%M:%S", time.gmtime(t))
            block.append(f"{step % NODES}: I0302 {clock}.{rnd.randrange(10**6):06d} 140234 gpu_executable.cc:{rnd.randrange(900)}] "
                         f"Buffer assignment for jit_train_step reused {rnd.randrange(100)} buffers")
            block.append(f"(RayTrainWorker pid={30000 + step % NODES}, ip=10.0.0.{step % NODES}) "
                         f"{stamp('%Y-%m-%d %H:%M:%S', time.gmtime(t))},{rnd.randrange(1000):03d}\tINFO worker.py:210 -- "
                         f"host memory {120 + rnd.random():.1f} GB of 2015.6 GB")
            if step % 97 == 0:
                block += [f"{n}: {hosts[n]}:2001:2042 [{n}] NCCL INFO Ring {c:02d} : 7 -> 0 -> 1 via P2P/IPC/read"
                          for n in range(NODES) for c in range(4)]
            if step % 500 == 0:
                block.append("\r".join(f"{p:3d}%|{'#' * (p // 10):10s}| {p}/100 [00:{p // 2:02d}<00:50]" for p in range(0, 101, 5)))
                block.append("/usr/lib/python3/dist-packages/orbax/checkpoint/async.py:88: UserWarning: async save in flight")
            step += 1
        data = ("\n".join(block) + "\n").encode()
        out.write(data)
        written += len(data)
    tail = ["3: Killed",
            "0: gpu-h00:2001:2099 [0] NCCL WARN Timeout waiting for receive from peer 3",
            "0: E0302 13:00:00.000000 140001 coordination_service.cc:1234] UNAVAILABLE: The following tasks are unhealthy "
            "(stopped sending heartbeats):", "0: /job:jax_worker/replica:0/task:3",
            "0: The tasks have crashed. Check the task logs for an earlier error to debug further.",
            "0: Traceback (most recent call last):", "0: jax.errors.JaxRuntimeError: UNAVAILABLE: task 3 is gone",
            "srun: error: gpu-h03: task 3: Exited with exit code 137",
            "========== JOB SUMMARY ==========", "Status: FAILED (exit 1)"]
    tail += [f"NODE_EXIT host={h} exit={137 if i == 3 else 1}" for i, h in enumerate(hosts)]
    out.write(("\n".join(tail) + "\n").encode())
    out.close()


def run(argv, env=None, stdin=None, out=None):
    """(seconds, peak RSS in MiB of the process and the children it waited for, exit code);
    `stdin` a file to read from, `out` a list that gets the output."""
    start = time.perf_counter()
    # Output goes to a pipe that is read: GNU grep stops at the first match when its output is
    # /dev/null (it then behaves like -q), which would time nothing.
    with open(stdin or os.devnull, "rb") as given:
        proc = subprocess.Popen(argv, stdin=given, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT,
                                env={**os.environ, **(env or {})})
        text = proc.stdout.read()
    proc.stdout.close()
    _, status, usage = os.wait4(proc.pid, 0)
    if out is not None:
        out.append(text)
    return time.perf_counter() - start, usage.ru_maxrss / 1024.0, os.waitstatus_to_exitcode(status)


def on_box_call(big, now, where):
    """(argv, stdin file) of the logclass bundle run as an exec channel runs it, on `big`."""
    src = onbox.script("logclass")
    request = json.dumps({"logs": [{"log": str(big), "now": now.timestamp()}]}).encode()
    stdin = where / "logclass.in"
    stdin.write_bytes(src + request)
    return ["sh", "-c", wrap.python_line(len(src), (), site=False)], stdin


def verdicts(workstation, box):
    """What the workstation's triage and the box's classifier said (status, primary, also, stage,
    progress), and whether all of it is the same."""
    data = json.loads(workstation)["data"]
    answer = json.loads(box)["answers"][0]
    same = all(data[k] == answer.get(k) for k in ("status", "primary", "also", "stage", "progress"))
    return (data["status"], data["primary"]), (answer.get("status"), answer.get("primary")), same


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", help="directory to write the logs into (kept); default: a temp dir")
    args = ap.parse_args()
    where = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="triage-bench-"))
    where.mkdir(parents=True, exist_ok=True)
    big, tiny = where / "big.log", where / "tiny.log"
    if not big.exists() or big.stat().st_size < args.size_mb << 20:
        t0 = time.perf_counter()
        write_log(big, args.size_mb << 20)
        print(f"wrote {big} ({big.stat().st_size / 2**20:.1f} MiB) in {time.perf_counter() - t0:.1f}s")
    tiny.write_bytes(b"[2025-03-02 10:00:00] completed step: 0, seconds: 1.0\n")
    cli = [sys.executable, "-m", "gpuops", "triage", "--json", "--now", "2025-03-04T12:00:00", "--log"]
    grep = ["grep", "-a", "-c", "-E"] + [x for p in grep_patterns() for x in ("-e", p)] + ["--", str(big)]
    box_argv, box_in = on_box_call(big, datetime.fromisoformat("2025-03-04T12:00:00"), where)
    best = {}
    rss = {}
    said = {}
    for _ in range(args.runs):
        for name, argv, env, stdin in (("startup", cli + [str(tiny)], None, None),
                                       ("triage", cli + [str(big)], None, None),
                                       ("triage/re", cli + [str(big)], {"GPUOPS_TRIAGE_ENGINE": "python"}, None),
                                       ("grep -cE", grep, {"LC_ALL": "C"}, None),
                                       ("on-box", box_argv, None, box_in)):
            out = []
            seconds, peak, code = run(argv, env, stdin, out)
            said[name] = out[0]
            best[name] = min(best.get(name, seconds), seconds)
            rss[name] = max(rss.get(name, 0.0), peak)
    work = best["triage"] - best["startup"]
    work_re = best["triage/re"] - best["startup"]
    mib = big.stat().st_size / 2**20
    print(f"log: {mib:.1f} MiB, {len(grep_patterns())} signatures, best of {args.runs}")
    for name in ("startup", "triage", "triage/re", "grep -cE", "on-box"):
        print(f"  {name:10s} {best[name] * 1000:8.0f} ms   peak RSS {rss[name]:6.1f} MiB")
    print(f"triage work (minus start-up): {work * 1000:.0f} ms = {mib / work:.0f} MiB/s")
    print(f"ratio triage / grep -cE: {work / best['grep -cE']:.2f}x (target <= 5x); pure-re fallback: "
          f"{work_re / best['grep -cE']:.1f}x")
    print(f"start-up: {best['startup'] * 1000:.0f} ms; peak RSS of the big run: {rss['triage']:.1f} MiB (target < 200)")
    ours, box, same = verdicts(said["triage"], said["on-box"])
    print(f"on-box classification (logclass bundle, python3 -S, head + step lines + tail): {best['on-box'] * 1000:.0f} ms "
          f"vs workstation `gpuops triage --log`: {best['triage'] * 1000:.0f} ms ({best['on-box'] / best['triage']:.2f}x); "
          f"verdict {box}: {'the same' if same else 'DIFFERS from the workstation ' + str(ours)} "
          f"(status, primary, also, stage, progress)")
    box_in.unlink()
    if not args.keep:
        big.unlink()
        tiny.unlink()
        where.rmdir()


if __name__ == "__main__":
    main()
