"""The generated reference documents: the coverage table's four columns, the catalog, and that
what is committed is what the generator makes."""

from gpuops import coverage as C
from gpuops import refdocs as D
from gpuops.gotcha import index, known_ids


def test_no_finding_in_the_code_cites_an_unknown_gotcha():
    known = known_ids()
    dangling = [f"{c.file}:{c.line} {c.finding or '?'} -> {c.gotcha}" for c in C.citations() if c.gotcha not in known]
    assert not dangling, "findings cite gotcha ids missing from references/gotchas.toml: " + "; ".join(dangling)


def test_coverage_has_four_columns_from_the_code_that_cites():
    entries = {k: index()[k] for k in ("U7", "U10", "U12", "U36", "GEN1")}
    cites = [C.Citation("gpuops/checks/disk.py", 3, "disk.inodes", "U7", C.CHECKED),
             C.Citation("gpuops/onbox/triage/classes.py", 9, "oom-gpu", "U10", C.EXPLAINED)]
    rows = D.table(entries, cites, kinds={"teardown.still-bills": {C.DOCUMENTED}})
    table = D.coverage_markdown(entries, rows)
    cells = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]] for line in table.splitlines()
             if line.startswith(("| U", "| GEN"))}
    assert cells["U7"][1:3] == ["checked", "`disk.inodes`"]
    assert cells["U10"][1] == "explained" and cells["U10"][4] == "`oom-gpu`" and not cells["U10"][2]
    assert cells["U12"][1] == "prevented" and cells["U12"][3].startswith("`pull`: ")
    assert cells["U36"][1] == "documented" and not any(cells["U36"][2:])
    assert cells["GEN1"][1] == "documented" and cells["GEN1"][5] == "`teardown.still-bills`"  # a reminder
    assert "U1-U43: 4 gotchas, 1 checked, 1 prevented, 1 explained, 1 documented only." in table


def test_a_reminder_or_a_triage_class_is_never_counted_as_a_check():
    rows = D.table()
    for gid in ("RP4", "VAST1", "LAM6", "PS1", "LR1", "GEN1", "AD-DANGER", "PS2", "GS4", "GS5"):
        assert C.columns(rows[gid]) == [C.DOCUMENTED] and rows[gid][C.DOCUMENTED], gid
    for gid in ("SLURM1", "SLURM2", "U15"):
        assert C.CHECKED not in rows[gid] and rows[gid][C.EXPLAINED], gid
    # U10's triage class explains a CUDA OOM afterwards; launch's warning on a GPU mostly in use is its check
    assert rows["U10"][C.CHECKED] == ["launch.gpu-memory"] and rows["U10"][C.EXPLAINED] == ["oom-gpu"]
    assert rows["GEN9"][C.CHECKED] == ["disk.shm"] and rows["GEN9"][C.EXPLAINED] == ["shm-exhausted"]
    assert "kernlog.unreadable" not in str(rows["U22"]) and "detach.missing" not in str(rows.get("U18"))


def test_generated_reference_docs_are_current():
    stale = [str(p) for p in D.stale_docs()]
    assert not stale, f"regenerate with `python -m gpuops.refdocs --write`: {stale}"


def test_coverage_command_prints_the_table():
    import subprocess
    import sys

    from tests.conftest import ROOT

    r = subprocess.run([sys.executable, "-m", "gpuops.refdocs", "--coverage"], capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert r.returncode == 0 and r.stdout == (ROOT / "references" / "COVERAGE.md").read_text()
