"""Checked sync against plain rsync, on loopback through the test rig's real sshd. One run.

    python3 benchmarks/sync.py [--mb 384] [--runs 3] [--small 10000]

Three figures, each a ratio against a baseline measured in the same run:

  throughput   `gpuops push` (walk, plan, rsync, sha256 of both ends, compare) of a tree of a few
               large files and some small ones into a fresh directory, against `rsync -a -e ssh`
               of the same tree into a fresh directory. Median of --runs, interleaved. Target:
               >= 0.9x rsync's rate. The box side is always read in full (every destination file
               is new); the source side comes from the local digest cache after the first run,
               as it does when the same tree is pushed again. The first run, with both digest
               caches empty, is shown too. Measured on bare loopback, where both ends and the
               hashing share this machine's cores, and through a relay limited to --link-mb (a
               WAN-like link, where the transfer, not the CPU, is the bottleneck; the relay gives
               a connection that sat idle no credit to burst with, so a kept master is limited too).
  cut at 50%   the connection is cut (the sshd child serving it is killed) when the big file is
               half-written at the destination; the push resumes by itself. Bytes on the wire are
               counted by a relay in front of sshd (tests/sync/wiremeter.py), not by gpuops, and
               compared with an uncut push of the same data through the same relay: the
               difference is what crossed the wire twice. Target: <= 5% of the payload. Both
               engines (rsync, and SFTP forced with --engine sftp).
  no-op        a re-push of --small small files that are all in place already, against rsync's
               no-op on the same tree (rsync compares sizes and mtimes only). Measured cold, with
               both digest caches emptied (gpuops reads and hashes every file on both ends), and
               warm, the case of a re-sync with nothing changed: every file's full stat (size,
               mtime, ctime, inode, device) matches its cache entry on both ends, so no file is
               read. Target: <= 1.2x rsync's time, warm.

The CLI is timed as a subprocess (interpreter start-up included, bytecode compiled once as an
installed gpuops has it: benchmarks/installed.py), and the in-process operation is shown beside it. Both ends share this machine's cores, as on any loopback run.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.installed import as_installed  # noqa: E402
from gpuops.ops.push import push as push_op  # noqa: E402
from gpuops.ops.sync import Options  # noqa: E402
from gpuops.remote.targets import target_for  # noqa: E402
from tests.rig.sshd import SshRig  # noqa: E402
from tests.sync.wiremeter import WireMeter  # noqa: E402


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def gpuops(env, *args):
    proc = subprocess.run([sys.executable, "-m", "gpuops", *args, "--json"], capture_output=True, text=True, env=env,
                          cwd=ROOT)
    doc = json.loads(proc.stdout)
    if proc.returncode != 0:
        raise SystemExit(f"gpuops {args[0]} failed ({proc.returncode}): {doc['summary']}")
    return doc


def rsync(env, cfg, spec, src, dst):
    subprocess.run(["rsync", "-a", "-e", f"ssh -F {cfg} -o BatchMode=yes -o StrictHostKeyChecking=accept-new", f"{src}/", f"{spec}:{dst}/"], check=True,
                   env=env, capture_output=True)


def make_big_tree(root: Path, mb: int) -> int:
    root.mkdir(parents=True)
    big = (mb - 8) // 3
    for i in range(3):
        with open(root / f"shard-{i}.bin", "wb") as f:
            for _ in range(big):
                f.write(os.urandom(1 << 20))
    (root / "code").mkdir()
    for i in range(400):
        (root / "code" / f"m{i}.py").write_bytes(os.urandom(20_000))
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def make_small_tree(root: Path, n: int):
    per_dir = 100
    for d in range(n // per_dir):
        (root / f"d{d:03d}").mkdir(parents=True)
        for i in range(per_dir):
            (root / f"d{d:03d}" / f"f{i}.txt").write_bytes(os.urandom(300))


def clear_caches(work):
    """Empty the digest caches of both ends (this machine's and the box's)."""
    for name in ("local-cache", "box-cache"):
        shutil.rmtree(work / name, ignore_errors=True)


def throughput(env, cfg, spec, src, payload, work, runs, label="loopback"):
    clear_caches(work)
    cold_dst = work / "thr-cold"
    t_cold = timed(lambda: gpuops(env, "push", "--host", spec, "--src", str(src), "--dst", str(cold_dst)))[0]
    shutil.rmtree(cold_dst)
    t_rsync, t_cli = [], []
    for i in range(runs):
        dst = work / f"thr-rsync-{i}"
        t_rsync.append(timed(lambda: rsync(env, cfg, spec, src, dst))[0])
        shutil.rmtree(dst)
        dst = work / f"thr-gpuops-{i}"
        t_cli.append(timed(lambda: gpuops(env, "push", "--host", spec, "--src", str(src), "--dst", str(dst)))[0])
        shutil.rmtree(dst)
    r, g = statistics.median(t_rsync), statistics.median(t_cli)
    mb = payload / 1e6
    print(f"throughput  {label}: payload {mb:.0f} MB  rsync {r:.2f}s ({mb / r:.0f} MB/s)  gpuops push {g:.2f}s "
          f"({mb / g:.0f} MB/s)  ratio {r / g:.2f}x  (target >= 0.90x); first push, both caches empty: "
          f"{t_cold:.2f}s, ratio {r / t_cold:.2f}x")
    return r / g


def cut_once(env, box, alias, src, dst, big_name, args, cut):
    record = {}
    done = threading.Event()

    def watch():
        half = (src / big_name).stat().st_size // 2
        while not done.is_set():
            for p in dst.glob(f".{big_name}.*") if dst.exists() else ():
                try:
                    if p.stat().st_size >= half:
                        record["at"] = p.stat().st_size
                        box.kill_session_children()
                        return
                except OSError:
                    pass
            time.sleep(0.005)

    t = threading.Thread(target=watch, daemon=True)
    if cut:
        t.start()
    doc = gpuops(env, "push", "--host", alias, "--src", str(src), "--dst", str(dst), *args)
    done.set()
    return doc, record


def resend(env, rig, box, src, payload, work):
    meter = WireMeter(box.port)
    rig.alias("bench-metered", port=meter.port)
    for engine in ("rsync", "sftp"):
        base = ["--engine", engine, "--retry-for", "60"]
        clean_dst, cut_dst = work / f"clean-{engine}", work / f"cut-{engine}"
        meter.reset()
        doc_clean, _ = cut_once(env, box, "bench-metered", src, clean_dst, "shard-0.bin", base, cut=False)
        clean = meter.up
        meter.reset()
        doc, record = cut_once(env, box, "bench-metered", src, cut_dst, "shard-0.bin", base, cut=True)
        wire = meter.up
        shutil.rmtree(clean_dst)
        shutil.rmtree(cut_dst)
        if not record:
            print(f"cut ({engine})  the transfer ended before it could be cut; no figure")
            continue
        extra = wire - clean
        d = doc["data"]
        print(f"cut ({engine:5})  cut at {record['at'] / 2 ** 20:.0f} MiB of shard-0.bin; wire {wire / 1e6:.1f} MB "
              f"vs {clean / 1e6:.1f} MB uncut: re-sent {extra / 1e6:.2f} MB = {extra / payload:.2%} of the payload "
              f"(target <= 5%); gpuops' own count {(d['bytes_sent'] - payload) / payload:+.2%}; retries "
              f"{d['retries']}; verified {d['verified']}; engines {doc_clean['data']['engine']}/{d['engine']}")
    meter.close()


def noop(env, cfg, box, work, n, runs):
    src = work / "small"
    make_small_tree(src, n)
    dst_r, dst_g = work / "noop-rsync", work / "noop-gpuops"
    rsync(env, cfg, box.spec, src, dst_r)
    gpuops(env, "push", "--host", box.spec, "--src", str(src), "--dst", str(dst_g))
    # Digests are stored only for files whose ctime is safely in the past (two seconds on a
    # whole-second filesystem; see gpuops.onbox.sync.digestcache).
    time.sleep(2.5)

    def push():
        secs, doc = timed(lambda: gpuops(env, "push", "--host", box.spec, "--src", str(src), "--dst", str(dst_g)))
        assert doc["data"]["sent_paths"] == 0 and doc["data"]["verified"]
        return secs, doc["data"]["hashing"]

    t_r = [timed(lambda: rsync(env, cfg, box.spec, src, dst_r))[0] for _ in range(runs)]
    r = statistics.median(t_r)
    clear_caches(work)
    cold, hashing = push()
    read = hashing["local"]["hashed_files"] + hashing["remote"]["hashed_files"]
    print(f"no-op cold  {n} files  rsync {r:.2f}s  gpuops push {cold:.2f}s  ratio {cold / r:.2f}x  "
          f"(digest caches empty: {read} files read and hashed on the two ends)")
    t_r, t_g, t_op = [], [], []
    for _ in range(runs):
        t_r.append(timed(lambda: rsync(env, cfg, box.spec, src, dst_r))[0])
        secs, hashing = push()
        assert hashing["local"]["hashed_files"] == hashing["remote"]["hashed_files"] == 0, hashing
        t_g.append(secs)
        target = target_for(box.spec)
        try:
            t_op.append(timed(lambda: push_op(target, str(src), str(dst_g), Options()))[0])
        finally:
            target.close()
    r, g, o = statistics.median(t_r), statistics.median(t_g), statistics.median(t_op)
    print(f"no-op warm  {n} files  rsync {r:.2f}s  gpuops push {g:.2f}s (in-process op {o:.2f}s)  ratio {g / r:.2f}x "
          f"(op alone {o / r:.2f}x; target <= 1.2x)  (0 files read: every digest from the caches)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=int, default=384, help="size of the throughput tree")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--small", type=int, default=10_000, help="files in the no-op tree")
    ap.add_argument("--link-mb", type=int, default=60,
                    help="also measure throughput through a relay limited to this many MB/s (0: skip)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gpuops-bench-sync-"))
    rig = SshRig(work / "rig")
    try:
        # Each end's digest cache lives in this run's work directory, so runs start cold.
        box = rig.box("bench", env={"XDG_CACHE_HOME": str(work / "box-cache")})
        env = as_installed({**rig.env(), "GPUOPS_STATE_DIR": str(work / "state"),
                            "XDG_CACHE_HOME": str(work / "local-cache")}, work / "pyc")
        os.environ.update(GPUOPS_SSH_CONFIG=env["GPUOPS_SSH_CONFIG"], GPUOPS_STATE_DIR=env["GPUOPS_STATE_DIR"],
                          XDG_CACHE_HOME=env["XDG_CACHE_HOME"])
        cfg = str(rig.ssh_config)
        subprocess.run(["ssh", "-F", cfg, "-o", "StrictHostKeyChecking=accept-new", box.spec, "true"], check=True,
                       capture_output=True)
        src = work / "tree"
        payload = make_big_tree(src, args.mb)
        throughput(env, cfg, box.spec, src, payload, work, args.runs)
        if args.link_mb:
            meter = WireMeter(box.port, rate_bytes_s=args.link_mb * 1e6)
            rig.alias("bench-link", port=meter.port)
            throughput(env, cfg, "bench-link", src, payload, work, 1, f"{args.link_mb} MB/s link")
            meter.close()
        resend(env, rig, box, src, payload, work)
        noop(env, cfg, box, work, args.small, max(3, args.runs))
    finally:
        rig.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
