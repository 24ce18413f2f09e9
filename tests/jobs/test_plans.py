"""Plans tied to actions, through the CLI: `reap --yes --plan ID` on real holder processes of
fixture GPU device nodes (tests.test_reap.GpuBox, its fake nvidia-smi), `push --delete --yes --plan
ID` over the real sshd rig; each refused when what it would touch changed since the dry run.
(`stop --plan` is in test_wait.py, next to the other job verbs.)"""

import json
import re
import subprocess
import sys

from tests.conftest import ROOT
# test_reap's `box` fixture, under a name the jobs tests' own `box` leaves free
from tests.test_reap import box as gpu_box  # noqa: F401


def gp(*args):
    p = subprocess.run([sys.executable, "-m", "gpuops", *args, "--json"], capture_output=True, text=True, timeout=120,
                       cwd=ROOT)
    return p.returncode, json.loads(p.stdout)


def reap(*args):
    return gp("reap", "--gpu", "0", "--min-age", "0", "--idle-window", "0", "--term-wait", "2", *args)


def test_a_plan_of_2_holders_is_refused_once_there_are_3_and_the_new_plan_applies(request):
    """vram_reap planned 2 holders; a third appeared; `yes` reaped 3."""
    b = request.getfixturevalue("gpu_box")
    two = [b.spawn("orphan", *b.dev("nvidia0"))[0]["holder"] for _ in range(2)]
    code, dry = reap()
    shown = dry["data"]["plan"]
    assert code == 5 and sorted(shown["pids"]) == sorted(two) and "exit_code_hint" not in dry
    third = b.spawn("orphan", *b.dev("nvidia0"))[0]["holder"]
    code, refused = reap("--yes", "--plan", shown["plan_id"])
    assert code == 5 and refused["error"]["kind"] == "refused" and "nothing was signalled" in refused["summary"]
    assert sorted(refused["data"]["plan"]["pids"]) == sorted(two + [third])
    assert all(b.alive(p) for p in two + [third])
    code, done = reap("--yes", "--plan", refused["data"]["plan"]["plan_id"])
    assert code == 0 and not any(b.alive(p) for p in two + [third]), done["summary"]
    code, bad = reap("--yes", "--plan", "not-a-plan")
    assert code == 2 and bad["error"]["kind"] == "usage"


def test_push_delete_applies_its_plan_and_refuses_when_the_extras_changed(jobs_box, tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    (src / "keep.txt").write_text("kept\n")
    for name in ("old1", "old2"):
        (dst / name).write_text("only here\n")
    push = ("push", "--host", jobs_box.spec, "--src", str(src), "--dst", str(dst), "--delete")
    _, dry = gp(*push)
    (listed,) = [f for f in dry["findings"] if f["id"] == "sync.would-delete"]
    assert sorted(listed["evidence"]["paths"]) == ["old1", "old2"]
    (dst / "old3").write_text("appeared since\n")
    (src / "new.txt").write_text("not sent by a refused push\n")
    code, refused = gp(*push, "--yes", "--plan", listed["evidence"]["plan_id"])
    assert code == 5 and refused["error"]["kind"] == "refused" and "nothing was deleted" in refused["summary"]
    assert sorted(p.name for p in dst.iterdir()) == ["keep.txt", "old1", "old2", "old3"]  # nothing moved either
    fresh = re.search(r"new plan (\S+)", refused["summary"]).group(1)
    code, done = gp(*push, "--yes", "--plan", fresh)
    assert code == 0, done["summary"]
    assert sorted(p.name for p in dst.iterdir()) == ["keep.txt", "new.txt"]
    code, bad = gp("push", "--host", jobs_box.spec, "--src", str(src), "--dst", str(dst), "--plan", fresh)
    assert code == 2 and bad["error"]["kind"] == "usage"


def test_plan_ids_change_with_the_set_and_carry_their_expiry():
    from gpuops.onbox.host import plans

    a = plans.plan_id("stop", "j", [(1, 10), (2, 20)], 100)
    assert a == plans.plan_id("stop", "j", [(2, 20), (1, 10)], 100) and plans.expiry(a) == 100
    assert a != plans.plan_id("stop", "j", [(1, 10), (2, 21)], 100) != plans.plan_id("stop", "j", [(1, 10)], 100)
    assert plans.expiry("nope") is None and plans.expiry(a + "x") is None
