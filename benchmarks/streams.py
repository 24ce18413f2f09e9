"""Several streams against one rsync: over an emulated long link and on loopback. One run.

    python3 benchmarks/streams.py [--runs 2] [--delay-ms 25] [--link-mb 8]

The payload is 160 MiB: one 96 MiB file and eight of 8 MiB. Each figure is a ratio against a
baseline measured in the same run, interleaved (rsync, gpuops, rsync, gpuops ...), medians:

  long link   `gpuops push` (walk, plan, measure the link, transfer over as many streams as it
              pays for, sha256 of both ends, compare) into a fresh directory, against one
              `rsync -a -e ssh` of the same tree into a fresh directory, both through a relay in
              front of the box's real sshd (tests/rig/longlink.py) that adds --delay-ms each way and
              holds each connection to --link-mb MB/s (the link as a whole uncapped). Target:
              >= 2x rsync's rate.
  loopback    the same, straight to the sshd. Target: >= 0.95x (the measurement keeps it one stream);
              and `gpuops push --streams 1` (no measurement at all) in the same rounds: what the
              choice costs where one stream is the answer (target: auto >= 0.95x of it).
  ceiling     eight bare `ssh HOST 'cat > /dev/null'` at once carrying the same bytes: no rsync, no
              hashing, no files. Where it is far under 8 x the per-connection rate, the machine's
              CPUs, not the link, bound any number of streams, gpuops' included.

As in benchmarks/sync.py, the source's digests come from this end's cache after the first push
(the same tree pushed again); that first push, with the cache empty, is shown beside the ratio.
The box's side is always read in full (every destination is new). Both are the CLI as a
subprocess (interpreter start-up included, bytecode compiled once as an installed gpuops has it:
benchmarks/installed.py). Both ends, the relay and the hashing share this machine's cores; the
first lines say how many and how loaded they were.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.installed import as_installed  # noqa: E402
from benchmarks.sync import gpuops, rsync, timed  # noqa: E402
from tests.rig.longlink import alias as long_alias  # noqa: E402
from tests.rig.sshd import SshRig  # noqa: E402

MIB = 1 << 20


def make_tree(root: Path) -> int:
    root.mkdir(parents=True)
    sizes = {"big.bin": 96} | {f"shard-{i}.bin": 8 for i in range(8)}
    for name, mib in sizes.items():
        with open(root / name, "wb") as f:
            for _ in range(mib):
                f.write(os.urandom(MIB))
    return sum(sizes.values()) * MIB


def ceiling(env, cfg, host, payload, streams=8) -> float:
    """Seconds for `streams` bare ssh streams at once to carry the payload to /dev/null: no
    rsync, no hashing, no files; what this machine's CPUs allow many streams right now."""
    each = payload // streams
    procs = [subprocess.Popen(["sh", "-c", f"head -c {each} /dev/zero | ssh -F {cfg} -o BatchMode=yes {host} "
                                           "'cat > /dev/null'"], env=env) for _ in range(streams)]
    return timed(lambda: [p.wait() for p in procs])[0]


def compare(env, cfg, host, src, payload, work, runs, label, target, against_one=False):
    """`against_one`: time `gpuops push --streams 1` (no measurement, the single-stream engine) in
    the same rounds, so what choosing costs where one stream is the answer is a ratio too."""
    t_rsync, t_gpuops, t_bare, t_one, streams = [], [], [], [], []
    dst = work / f"{host}-cold"
    t_cold = timed(lambda: gpuops(env, "push", "--host", host, "--src", str(src), "--dst", str(dst)))[0]
    shutil.rmtree(dst)
    for i in range(runs):
        t_bare.append(ceiling(env, cfg, host, payload))
        dst = work / f"{host}-rsync-{i}"
        t_rsync.append(timed(lambda: rsync(env, cfg, host, src, dst))[0])
        shutil.rmtree(dst)
        dst = work / f"{host}-gpuops-{i}"
        secs, doc = timed(lambda: gpuops(env, "push", "--host", host, "--src", str(src), "--dst", str(dst)))
        assert doc["data"]["verified"], doc["summary"]
        t_gpuops.append(secs)
        streams.append(doc["data"]["link"]["streams"])
        shutil.rmtree(dst)
        if against_one:
            dst = work / f"{host}-one-{i}"
            t_one.append(timed(lambda: gpuops(env, "push", "--host", host, "--src", str(src), "--dst", str(dst),
                                              "--streams", "1"))[0])
            shutil.rmtree(dst)
    r, g, b = statistics.median(t_rsync), statistics.median(t_gpuops), statistics.median(t_bare)
    mb = payload / 1e6
    chosen = ", ".join(f"{s['count']} ({s.get('why', '')})" for s in streams)
    print(f"{label}: payload {mb:.0f} MB  rsync {r:.2f}s ({mb / r:.1f} MB/s)  "
          f"gpuops push {g:.2f}s ({mb / g:.1f} MB/s)  "
          f"ratio {r / g:.2f}x  (target >= {target}x); first push, this end's digest cache empty: {t_cold:.2f}s, "
          f"ratio {r / t_cold:.2f}x\n    runs: rsync {', '.join(f'{t:.2f}' for t in t_rsync)}; "
          f"gpuops {', '.join(f'{t:.2f}' for t in t_gpuops)}; streams chosen: {chosen}\n"
          f"    ceiling: 8 bare ssh streams to /dev/null {b:.2f}s ({mb / b:.1f} MB/s), {r / b:.2f}x rsync: the most "
          f"any 8 streams got from this machine's CPUs at that moment", flush=True)
    if t_one:
        o = statistics.median(t_one)
        pairs = [a / b for a, b in zip(t_one, t_gpuops)]
        print(f"    against --streams 1 (no measurement): {o:.2f}s; auto / one stream {o / g:.2f}x "
              f"(target >= 0.95x), pair by pair {', '.join(f'{p:.2f}' for p in pairs)}", flush=True)
    return r / g


def trust(cfg, host):
    """The box's host key in known_hosts before anything is timed."""
    subprocess.run(["ssh", "-F", cfg, "-o", "StrictHostKeyChecking=accept-new", host, "true"], check=True,
                   capture_output=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--delay-ms", type=float, default=25.0, help="added in each direction")
    ap.add_argument("--link-mb", type=float, default=8.0, help="MB/s each connection is held to")
    ap.add_argument("--loopback-only", action="store_true", help="skip the long link (minutes at 8 MB/s)")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores; load average before: {os.getloadavg()[0]:.1f} "
          f"(1 min), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="gpuops-bench-streams-"))
    rig = SshRig(work / "rig")
    try:
        box = rig.box("bench", env={"XDG_CACHE_HOME": str(work / "box-cache")})
        env = as_installed({**rig.env(), "GPUOPS_STATE_DIR": str(work / "state"),
                            "XDG_CACHE_HOME": str(work / "local-cache")}, work / "pyc")
        cfg = str(rig.ssh_config)
        src = work / "tree"
        payload = make_tree(src)
        trust(cfg, box.spec)
        if not args.loopback_only:
            with long_alias(rig, box, "bench-far", delay_s=args.delay_ms / 1e3, rate_bytes_s=args.link_mb * 1e6,
                            lifetime_s=3600):
                trust(cfg, "bench-far")
                compare(env, cfg, "bench-far", src, payload, work, args.runs,
                        f"long link ({args.delay_ms:g} ms each way, {args.link_mb:g} MB/s per connection)", 2)
        compare(env, cfg, box.spec, src, payload, work, args.runs, "loopback", 0.95, against_one=True)
        print(f"load average after: {os.getloadavg()[0]:.1f} (1 min)")
    finally:
        rig.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
