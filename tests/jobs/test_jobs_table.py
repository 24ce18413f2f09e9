"""`status` as people read it: whole ids, short ids that name a job, `-` for no name, a default
limit that says how many are older, and columns left out by priority at narrow widths."""

import json
import os
import shutil

import pytest

from gpuops import errors
from gpuops.ops import jobs as op
from gpuops.remote.local import LocalTarget
from gpuops.render.columns import fit
from tests.jobs.helpers import kill_everything, wait_for


@pytest.fixture
def local_jobs(tmp_path):
    d = tmp_path / "jobs"
    yield d
    kill_everything(d)


def _finished(jobs_dir, **kw):
    doc = op.launch(LocalTarget(), command="echo step 1", jobs_dir=str(jobs_dir), **kw)
    job = doc["data"]["job"]["job_id"]
    assert wait_for(lambda: (jobs_dir / job / "exit.json").exists())
    return job


def _older_copies(jobs_dir, job, n):
    """n records of older finished jobs: the real job's records under ids minted earlier."""
    ids = []
    for i in range(n):
        old = f"20200101-0000{i:02d}-{i:06x}"
        shutil.copytree(jobs_dir / job, jobs_dir / old)
        meta = json.loads((jobs_dir / old / "meta.json").read_text())
        meta.update(job_id=old, launched_at=meta["launched_at"] - 86400 - i)
        (jobs_dir / old / "meta.json").write_text(json.dumps(meta))
        ids.append(old)
    return ids


def test_a_unique_start_or_end_of_an_id_names_the_job_and_a_shared_one_lists_the_candidates(local_jobs):
    job = _finished(local_jobs)
    older = _older_copies(local_jobs, job, 2)
    t = LocalTarget()
    for piece in (job[-6:], job[:17]):
        doc = op.status(t, job=piece, jobs_dir=str(local_jobs))
        assert doc["data"]["jobs"][0]["job_id"] == job, piece
    with pytest.raises(errors.Ambiguous) as e:
        op.status(t, job="20200101", jobs_dir=str(local_jobs))
    assert all(o in e.value.message for o in older) and job not in e.value.message
    with pytest.raises(errors.NotFound):
        op.status(t, job=job[-3:], jobs_dir=str(local_jobs))  # too short to name a job by chance


def test_an_unnamed_job_has_no_name_and_its_row_shows_a_dash(cli, local_jobs):
    job = _finished(local_jobs)
    meta = json.loads((local_jobs / job / "meta.json").read_text())
    assert meta["name"] is None  # it was the id, so the table showed the id twice
    r = cli("status", "--jobs-dir", str(local_jobs), env={**os.environ, "COLUMNS": "140"})
    row = next(line for line in r.stdout.splitlines() if line.startswith(job))
    assert row.split()[1] == "-"


def test_status_lists_twenty_by_default_says_how_many_are_older_and_limit_0_lists_all(cli, local_jobs):
    job = _finished(local_jobs, name="newest")
    _older_copies(local_jobs, job, 22)
    r = cli("status", "--jobs-dir", str(local_jobs))
    rows = [line for line in r.stdout.splitlines() if line[:8].isdigit()]
    assert len(rows) == 20 and rows[0].startswith(job)
    assert "… 3 older (--limit 0 lists them all)" in r.stdout
    doc = json.loads(cli("status", "--jobs-dir", str(local_jobs), "--limit", "0", "--json").stdout)
    assert len(doc["data"]["jobs"]) == 23 and doc["data"]["more"] == 0


def test_a_narrow_terminal_drops_whole_columns_and_never_cuts_the_id(cli, local_jobs):
    """At 80 columns every id lost its unique end and "last progress" shrank to nothing."""
    job = _finished(local_jobs, name="an experiment name longer than any column should be")
    for width, header in ((140, "JOB NAME STATE AGE LAST PROGRESS PID"), (80, "JOB NAME STATE AGE LAST PROGRESS PID"),
                          (50, "JOB NAME STATE AGE"), (36, "JOB STATE")):
        r = cli("status", "--jobs-dir", str(local_jobs), env={**os.environ, "COLUMNS": str(width)})
        lines = r.stdout.splitlines()
        assert " ".join(lines[0].split()) == header, (width, r.stdout)
        assert lines[1].startswith(job + " ") and all(len(line) <= width for line in lines[:2]), (width, r.stdout)
    piped = cli("status", "--jobs-dir", str(local_jobs)).stdout  # a pipe: every value whole, for grep
    assert "an experiment name longer than any column should be" in piped and "step 1" in piped


@pytest.mark.parametrize("width,expected", [
    (200, {"id": 22, "state": 9, "name": 30, "progress": 20, "pid": 5}),
    (80, {"id": 22, "state": 9, "name": 24, "progress": 12, "pid": 5}),
    (60, {"id": 22, "state": 9, "name": 11, "progress": 12}),
    (40, {"id": 22, "state": 9, "pid": 5}),  # progress cannot fit even cut; the narrow pid still does
])
def test_fit_keeps_columns_by_priority_and_widens_the_cut_ones_with_what_is_left(width, expected):
    columns = [("id", 22, 0), ("state", 9, 0), ("name", 30, 8), ("progress", 20, 12), ("pid", 5, 0)]
    assert fit(columns, width) == expected


def test_status_watch_redraws_the_table_until_ctrl_c_and_prints_the_last_one(local_jobs):
    """`status` had no --watch (`sky status`, `pueue status` and fleet --watch have one)."""
    from tests import terminal

    job = _finished(local_jobs, name="demo")
    env = {**os.environ, "GPUOPS_JOBS_DIR": str(local_jobs)}
    code, raw = terminal.run("status", "--watch", cols=100, env=env,
                             interrupt_after=lambda out: out.count(b"Ctrl-C ends") >= 2)
    lines = terminal.frames(raw)
    assert code == 0 and lines[0].endswith("asking local for its jobs"), lines[:3]
    assert sum(1 for line in lines if line.startswith(job) and "COMPLETED" in line) >= 2, lines
    assert lines[-1] == "local: 1 COMPLETED (1 shown)" and raw.rfind("\x1b[?25h") > raw.rfind("\x1b[?25l")
    refused = terminal.run("status", "--watch", "--json", env=env)
    assert refused[0] == errors.USAGE


@pytest.mark.parametrize("rows,older", [(24, 25), (10, 11)])
def test_status_watch_keeps_its_summary_line_at_any_height(local_jobs, rows, older):
    """At 80x24 with more jobs than rows, rich's Live cut the drawing at its bottom: the summary
    line (what the table counts, when it was taken, that Ctrl-C ends it) became `...`."""
    from tests import terminal

    job = _finished(local_jobs, name="demo")
    _older_copies(local_jobs, job, older)
    env = {**os.environ, "GPUOPS_JOBS_DIR": str(local_jobs)}
    code, raw = terminal.run("status", "--watch", "--limit", "0", cols=80, rows=rows, env=env,
                             interrupt_after=lambda out: out.count(job.encode()) >= 2)
    drawn = raw[:raw.rfind("\x1b[?25h")]  # the frames, not the report printed after Ctrl-C
    lines = terminal.frames(drawn)
    assert code == 0 and "Ctrl-C ends)" in drawn and "..." not in lines, lines[-5:]
    assert any(line.startswith("… ") and "more rows" in line for line in lines), lines[-5:]
