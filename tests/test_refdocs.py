"""The generated reference documents and the scan of the code that cites gotchas."""

from gpuops import refdocs as D
from gpuops.gotcha import index, known_ids


def test_citation_scanner_reads_keywords_and_dicts(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "checks.py").write_text(
        'Finding("disk.inodes", "fail", "t", gotcha="U7")\n'
        'Finding(id="gpu.xid", severity="fail", title="t", gotcha="U22, U3")\n'
        'x = {"id": "mem.oom", "gotcha": "U9"}\n'
        'Finding(fid, "warn", "t", gotcha=variable)\n'
        'from gpuops import xid as X\n'
        'Finding("gpu.lost", "fail", "t", gotcha=X.GOTCHA)\n')
    cites = {(c.finding, c.gotcha) for c in D.citations(pkg)}
    assert cites == {("disk.inodes", "U7"), ("gpu.xid", "U22"), ("gpu.xid", "U3"), ("mem.oom", "U9"),
                     ("gpu.lost", "U22")}


def test_no_finding_in_the_code_cites_an_unknown_gotcha():
    known = known_ids()
    dangling = [f"{c.file}:{c.line} {c.finding or '?'} -> {c.gotcha}" for c in D.citations() if c.gotcha not in known]
    assert not dangling, "findings cite gotcha ids missing from references/gotchas.toml: " + "; ".join(dangling)


def test_coverage_marks_checked_prevented_and_reference():
    entries = {k: index()[k] for k in ("U7", "U12", "U36")}
    cites = [D.Citation("gpuops/checks/disk.py", 3, "disk.inodes", "U7")]
    table = D.coverage_markdown(entries, cites)
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("| U")}
    assert "| checked |" in rows["U7"] and "`disk.inodes`" in rows["U7"]
    assert "| prevented |" in rows["U12"] and "`pull`" in rows["U12"]
    assert "| reference |" in rows["U36"]
    assert "3 gotchas: 1 checked by a finding, 1 prevented by a verb's design, 1 reference only." in table


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
