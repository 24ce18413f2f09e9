"""The pure parts of sync: plan and comparison, budget, backoff, rsync exit classes and argv
(over the target's own ssh command line), CRLF detection."""

import os
import shlex
import subprocess
import tempfile

import pytest

from gpuops.errors import UsageError
from gpuops.remote.hostspec import HostSpec
from gpuops.remote.openssh import OpenSSHTarget
from gpuops.sync import crlf, diskfit, plan, rsync
from gpuops.sync.retry import Backoff

A = "a" * 64
B = "b" * 64


def test_plan_sends_only_what_differs_and_lists_extras():
    src = plan.by_path([["d", "d", 0, None, None], ["d/same", "f", 3, A, None], ["d/changed", "f", 3, A, None],
                        ["d/grown", "f", 4, A, None], ["new", "f", 1, B, None], ["ln", "l", 0, None, "d/same"],
                        ["sock", "o", 0, None, None]])
    dst = plan.by_path([["d", "d", 0, None, None], ["d/same", "f", 3, A, None], ["d/changed", "f", 3, B, None],
                        ["d/grown", "f", 3, A, None], ["ln", "l", 0, None, "elsewhere"], ["old", "d", 0, None, None],
                        ["old/x", "f", 1, A, None]])
    p = plan.make(src, dst)
    assert p.send == ["d/changed", "d/grown", "ln", "new"]
    assert p.equal == ["d", "d/same"] and p.skipped == ["sock"] and p.extras == ["old"]
    assert plan.same_size_files(src, dst) == {"d/same": 3, "d/changed": 3}
    problems = {m["path"]: m["problem"] for m in plan.mismatches(src, dst, sorted(src), "local", "remote")}
    assert problems == {"d/changed": "content", "d/grown": "size", "ln": "link", "new": "missing"}


def test_an_unhashed_file_is_never_taken_as_equal():
    src = plan.by_path([["f", "f", 3, None, None]])
    dst = plan.by_path([["f", "f", 3, A, None]])
    assert plan.make(src, dst).send == ["f"]
    assert plan.mismatches(src, dst, ["f"])[0]["problem"] == "unreadable"


def test_type_change_is_a_mismatch():
    m = plan.mismatches(plan.by_path([["x", "f", 1, A, None]]), plan.by_path([["x", "d", 0, None, None]]), ["x"],
                        "local", "remote")
    assert m == [{"path": "x", "problem": "type", "local": {"kind": "file", "size": 1, "sha256": A},
                  "remote": {"kind": "directory"}}]


def test_budget_counts_blocks_and_inodes():
    src = plan.by_path([["d", "d", 0, None, None], ["d/tiny", "f", 100, None, None], ["big", "f", 10_000, None, None],
                        ["replaced", "f", 5, None, None]])
    dst = plan.by_path([["replaced", "f", 9, None, None]])
    need = diskfit.need(src, dst, ["d", "d/tiny", "big", "replaced"], root_exists=False)
    # a directory block + 1 block + 3 blocks + 1 block; inodes: root, d, tiny, big (+ partial dir + temp)
    assert need == {"bytes": 4096 * 6, "inodes": 1 + 3 + 2}


@pytest.mark.parametrize("free_bytes,free_inodes,total_inodes,fits,short", [
    (10 << 20, 1000, 1000, True, []),
    (1 << 20, 1000, 1000, False, ["bytes"]),
    (10 << 20, 20, 1000, False, ["inodes"]),
    (10 << 20, 0, 0, True, []),  # f_files == 0: the filesystem has no inode limit
])
def test_budget_check_with_margin(free_bytes, free_inodes, total_inodes, fits, short):
    verdict = diskfit.check({"bytes": 1 << 20, "inodes": 10},
                           {"free_bytes": free_bytes, "free_inodes": free_inodes, "total_inodes": total_inodes,
                            "path": "/data"})
    assert (verdict["fits"], verdict["short_of"]) == (fits, short)
    if not fits:
        line = diskfit.refusal(verdict, "box:/data/run")
        assert f"({free_bytes} B)" in line and "box:/data/run" in line and "exit 5" in line


def test_backoff_stops_at_the_budget_or_the_cap():
    clock = [0.0]
    waits = []
    b = Backoff(budget_s=10, first_s=1, factor=2, cap_s=4, max_retries=10, clock=lambda: clock[0],
                sleep=lambda s: (waits.append(s), clock.__setitem__(0, clock[0] + s)))
    while b.wait():
        pass
    assert waits == [1, 2, 4] and b.retries == 3  # the next 4 s wait would end past 10 s
    b = Backoff(budget_s=1000, first_s=0, max_retries=2, sleep=lambda s: None)
    assert b.wait() and b.wait() and not b.wait()


@pytest.mark.parametrize("code,stderr,outcome", [
    (0, "", "ok"),
    (12, "rsync error: error in rsync protocol data stream (code 12)", "retry"),
    (255, "ssh: connect to host x port 22: Connection refused", "retry"),
    (30, "[sender] io timeout after 30 seconds -- exiting", "retry"),
    (23, 'rsync: [sender] send_files failed to open "/x": Permission denied (13)', "partial"),
    (24, 'file has vanished: "/src/tmp.1"', "vanished"),
    (11, 'rsync: [receiver] write failed on "/d/f": No space left on device (28)', "disk-full"),
    (12, 'rsync: [receiver] write failed on "/d/f": Disk quota exceeded (122)', "disk-full"),
    (3, "rsync: change_dir#3 failed", "fatal"),
    (20, "rsync error: received SIGINT", "interrupted"),
])
def test_rsync_exit_codes_map_to_outcomes(code, stderr, outcome):
    assert rsync.classify(code, stderr)[0] == outcome


def _spec(**kw):
    base = dict(spec="ubuntu@gpu1:2222", hostname="10.0.0.5", user="ubuntu", port=2222, identity_files=("/keys/k",),
                identities_only=True, proxy_jump="bastion", known_hosts=("/kh/a", "/kh/b"), connect_timeout=7,
                keepalive_s=15)
    base.update(kw)
    return HostSpec(**base)


def test_rsync_rides_the_targets_own_ssh_command_line(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUOPS_SSH_CONFIG", "/cfg/ssh config")
    monkeypatch.setenv("GPUOPS_SSH_PERSIST", "0")  # a target with no master kept between calls
    target = OpenSSHTarget(_spec(), identity="/keys/my key")
    eng = rsync.RsyncEngine("pull", "/local dir", "/remote/-dir", target=target, io_timeout=12,
                            rsync_version=(3, 2, 7))
    argv = eng.argv("/tmp/list", force=True)
    rsh = shlex.split(argv[argv.index("-e") + 1])  # rsync splits -e like a shell without backslashes
    assert rsh == target.ssh_argv()[:-1]
    for opt in ("BatchMode=yes", "StrictHostKeyChecking=accept-new", "ServerAliveInterval=15", "ConnectTimeout=7"):
        assert opt in rsh
    assert rsh[rsh.index("-F") + 1] == "/cfg/ssh config" and rsh[rsh.index("-i") + 1] == "/keys/my key"
    assert argv[-2:] == ["gpu1:/remote/-dir/", "/local dir/"]  # the name as given: ssh applies ssh_config to it
    target._mux_dir = str(tmp_path)  # once the target has a master connection, rsync reuses it
    rsh = shlex.split((lambda a: a[a.index("-e") + 1])(eng.argv("/tmp/list")))
    assert f"ControlPath={tmp_path}/%C" in rsh
    # A master kept between calls: rsync rides it and never becomes one itself.
    monkeypatch.setenv("GPUOPS_SSH_PERSIST", "60")
    monkeypatch.setenv("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="gpr"))  # short: a long socket path turns reuse off
    kept = OpenSSHTarget(_spec(), identity="/keys/my key")
    assert kept.kept_socket
    eng = rsync.RsyncEngine("pull", "/local dir", "/remote/-dir", target=kept, io_timeout=12, rsync_version=(3, 2, 7))
    rsh = shlex.split((lambda a: a[a.index("-e") + 1])(eng.argv("/tmp/list")))
    assert f"ControlPath={kept.kept_socket}" in rsh and "ControlMaster=no" in rsh
    assert rsync.remote_path("::1", "/d/") == "[::1]:/d/"
    with pytest.raises(UsageError):
        rsync.rsh_quote("it's \"both\"")


def test_rsync_argv_protects_names_and_keeps_partials():
    eng = rsync.RsyncEngine("pull", "/local dir", "/remote/-dir", target=OpenSSHTarget(_spec()), io_timeout=12,
                            rsync_version=(3, 2, 7))
    argv = eng.argv("/tmp/list", force=True)
    assert "-s" in argv and "--from0" in argv and "--partial-dir=.gpuops-partial" in argv and "--timeout=12" in argv
    assert "--ignore-times" in argv and "--info=progress2" in argv
    old = rsync.RsyncEngine("push", "/l", "/r", rsync_version=(3, 0, 9)).argv("/tmp/list")
    assert "--info=progress2" not in old and old[-2:] == ["/l/", "/r/"]


def test_rsync_run_parses_progress_and_stats_of_a_real_rsync(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "f").write_bytes(os.urandom(300_000))
    seen = []
    eng = rsync.RsyncEngine("push", str(src), str(dst), rsync_version=rsync.version())
    dst.mkdir()
    out = eng.run(["f"])
    assert out.failure is None and out.attempts[0].outcome == "ok"
    assert out.bytes_sent == 300_000 and out.wire_bytes >= 300_000
    run = rsync.Run(eng.argv(str(tmp_path / "none")), lambda done, files=None: seen.append((done, files)))
    (tmp_path / "none").write_bytes(b"f\0")
    (dst / "f").unlink()
    assert run() == 0 and seen and seen[-1] == (300_000, 1) and run.stats["Literal data"] == 300_000


def test_crlf_only_in_shell_scripts(tmp_path):
    files = {"a.sh": b"echo\r\n", "launch": b"#!/usr/bin/env bash\r\nx\r\n", "b.py": b"print()\r\n",
             "notes": b"plain text\r\n", "ok.sh": b"echo\n", "c.BASH": b"x\r\ny\r\n"}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    entries = plan.by_path([n, "f", len(d), None, None] for n, d in files.items()).values()
    found = {f["path"]: f["crlf_lines"] for f in crlf.scan(str(tmp_path), entries)}
    assert found == {"a.sh": 1, "launch": 2, "c.BASH": 2}
    os.chmod(tmp_path / "launch", 0o755)
    assert sorted(crlf.fix(str(tmp_path), list(found))) == sorted(found)
    assert (tmp_path / "launch").read_bytes() == b"#!/usr/bin/env bash\nx\n"
    assert os.stat(tmp_path / "launch").st_mode & 0o777 == 0o755
    assert crlf.scan(str(tmp_path), entries) == []


def test_rsync_is_real():
    assert subprocess.run(["rsync", "--version"], capture_output=True).returncode == 0


def test_a_pull_into_a_path_under_a_file_is_a_usage_error_not_an_internal_one(tmp_path):
    """`pull --dst FILE/x` got as far as makedirs and exited 70 with `[Errno 20] Not a directory`."""
    from tests.conftest import gpuops

    (tmp_path / "src").mkdir()
    (tmp_path / "file").write_text("x")
    r = gpuops("pull", "--host", "local", "--src", str(tmp_path / "src"), "--dst", str(tmp_path / "file" / "x"),
               env={**os.environ, "GPUOPS_STATE_DIR": str(tmp_path / "state")})
    assert r.returncode == 2, r.stderr
    assert r.stderr == f"gpuops: --dst '{tmp_path}/file/x' is under '{tmp_path}/file', which is a file; give a directory\n"


def test_verify_takes_src_and_dst_as_push_does_and_the_old_names_still(tmp_path):
    """push and pull took --src/--dst, verify --local/--remote, and `verify --src` got no did-you-mean."""
    from tests.conftest import gpuops

    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "f").write_text("x")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    for flags in (("--src", "--dst"), ("--local", "--remote"), ("--src", "--remote")):
        r = gpuops("verify", "--host", "local", flags[0], str(tree), flags[1], str(tree), env=env)
        assert r.returncode == 0 and r.stdout.startswith("local: verified: 1 files"), (flags, r.stdout + r.stderr)
    r = gpuops("verify", "--host", "local", "--src", str(tree), "--local", "/elsewhere", "--dst", str(tree), env=env)
    assert r.returncode == 2 and r.stderr == "gpuops: --local is the old name of --src: give one of them\n"
    r = gpuops("verify", "--host", "local", "--srcc", str(tree), env=env)
    assert r.returncode == 2 and "did you mean --src?" in r.stderr
    r = gpuops("verify", "--host", "local", "--dst", str(tree), env=env)
    assert r.returncode == 2 and "verify needs --src (the local directory, the reference)" in r.stderr
