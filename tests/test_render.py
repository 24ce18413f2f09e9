"""What people see: doctor-style findings, the verdict first and last, screens that fit."""

import io
import os

from rich.cells import cell_len
from rich.console import Console

from gpuops.render import doctor, print_findings, short, summary_line, verdict_line

LONG_FIX = "sudo sysctl -w vm.overcommit_memory=1 && echo 'vm.overcommit_memory = 1' | sudo tee /etc/sysctl.d/99-gpuops.conf"


def _screen(findings, width=80, height=25, **kw):
    out = io.StringIO()
    con = Console(file=out, width=width, height=height, no_color=True, highlight=False, soft_wrap=False)
    print_findings(findings, con, **kw)
    return out.getvalue()


def _finding(fid, sev, **kw):
    return {"id": fid, "severity": sev, "title": f"{fid} title", "evidence": kw.pop("evidence", {}),
            "fix": kw.pop("fix", None), "gotcha": kw.pop("gotcha", None)}


def test_problems_come_worst_first_and_each_passing_check_takes_one_line():
    text = _screen([_finding("a.ok", "ok"), _finding("b.warn", "warn"), _finding("c.fail", "fail"),
                    _finding("dd.ok", "ok"), _finding("e.info", "info")])
    heads = [line for line in text.splitlines() if not line.startswith(" ")]
    assert heads == ["✗ FAIL c.fail  c.fail title", "! WARN b.warn  b.warn title", "i INFO e.info  e.info title",
                     "✓ a.ok   a.ok title", "✓ dd.ok  dd.ok title"]


def test_passing_checks_fold_into_one_line_when_the_report_would_pass_a_screen_and_all_lists_them():
    findings = [_finding("c.fail", "fail", evidence={"k": 1}, fix="do it")] + [_finding(f"p{i}.ok", "ok")
                                                                              for i in range(12)]
    fits = _screen(findings, height=25, around=3)  # 2 + 12 + 3 rows: within the 20 of a screen
    assert fits.count("✓ p") == 12
    folded = _screen(findings, height=25, around=7)
    assert "✓ p" not in folded
    assert folded.splitlines()[-1] == "✓ 12 checks passed (--verbose: evidence and fixes; --all: every check)"
    assert _screen(findings, height=25, around=7, verbose=True).splitlines()[-1] == \
        "✓ 12 checks passed (--all lists them)"
    assert _screen(findings, height=25, around=7, show_all=True).count("✓ p") == 12
    assert "✓ p" not in _screen(findings, height=14, around=0)  # a short terminal is a smaller screen


def test_a_problem_is_one_line_cut_at_the_edge_and_its_fix_shown_once():
    """A sick box's preflight was three screens: a block of evidence per finding, and each fix
    twice (under its finding and again as advice)."""
    title = "GPU 0 (00000000:1B:00.0) is in hardware slowdown (hw_slowdown, hw_thermal_slowdown): clocks cut"
    findings = [dict(_finding("gpu.throttle", "fail", evidence={"mask": "0x48"}, fix="rent another box"), title=title),
                _finding("cpu.threads", "warn", fix="export OMP_NUM_THREADS=1"),
                _finding("boot.recent", "info", fix="uptime -s")]
    lines = _screen(findings).splitlines()
    assert lines[0] == "✗ FAIL gpu.throttle  GPU 0 (00000000:1B:00.0) is in hardware slowdown (hw_slowd…"
    assert lines[1:] == ["    fix: rent another box", "! WARN cpu.threads   cpu.threads title",
                         "i INFO boot.recent   boot.recent title"]  # a warning's fix: advice, or --verbose
    # a fix the report shows anyway (its advice, its next step) is not repeated
    assert "fix:" not in _screen(findings, elsewhere={"rent another box"})
    assert _screen(findings, verbose=True).count("fix:") == 3


def test_a_fix_is_one_line_copied_whole_at_any_width():
    """The fix command wrapped over 9 table rows at 80 columns: not copy-pasteable."""
    text = _screen([_finding("mem.overcommit", "warn", fix=LONG_FIX, evidence={"overcommit": 2})], width=60,
                   verbose=True)
    (fix,) = [line for line in text.splitlines() if "fix:" in line]
    assert fix.strip() == f"fix: {LONG_FIX}"
    assert "    overcommit: 2" in text


def test_evidence_is_key_value_lines_bounded_and_empty_values_left_out():
    evidence = {f"k{i}": "v" * 300 for i in range(10)}
    evidence["empty"] = None
    text = _screen([_finding("x.fail", "fail", evidence=evidence)], width=80, verbose=True)
    lines = [line for line in text.splitlines() if line.startswith("    k")]
    assert len(lines) == 8 and all(len(line) <= 80 for line in text.splitlines())
    assert "2 more in --json" in text and "empty" not in text


def test_under_verbose_a_kernel_line_wraps_instead_of_losing_its_last_words():
    """The Xid line was cut just before `GPU has fallen off the bus`, the words that matter."""
    line = ("Mar  4 03:41:02 gpu-box kernel: [ 9662.880447] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', "
            "name=<unknown>, GPU has fallen off the bus.")
    text = _screen([_finding("gpu.xid", "fail", evidence={"line": line})], width=80, verbose=True)
    assert "off the bus." in text and "…" not in text


def test_the_verdict_is_first_and_last():
    out = io.StringIO()
    con = Console(file=out, width=80, no_color=True)
    doc = {"ok": False, "host": "box", "summary": "NOT READY: 1 failed", "findings": [_finding("c.fail", "fail")],
           "next": [{"argv": ["gpuops", "preflight", "--host", "box", "--path", "/data dir"]}]}
    doctor(doc, con)
    lines = out.getvalue().splitlines()
    assert lines[0] == lines[-1] == "box: NOT READY: 1 failed"
    assert lines[-2] == "  next: gpuops preflight --host box --path '/data dir'"  # quoted: it can be pasted
    verdict_line(doc, con)
    summary_line(doc, con)  # a verb that is no single-box report (status, launch): the verdict, then what to do
    assert out.getvalue().splitlines()[-1] == lines[-2]


def test_a_long_verdict_ends_a_report_in_one_row_cut_after_a_clause_or_a_word():
    verdict = "NOT READY: GPU 0 is in hardware slowdown (hw_slowdown, hw_thermal_slowdown); 1 failed, 4 warnings, 9 ok"
    assert short(verdict, 200) == verdict
    assert short(verdict, 90) == "NOT READY: GPU 0 is in hardware slowdown (hw_slowdown, hw_thermal_slowdown)…"
    assert short(verdict, 60) == "NOT READY: GPU 0 is in hardware slowdown (hw_slowdown…"
    assert cell_len(short("關機 " * 40, 20)) <= 20  # counted in cells: a wide character takes two
    out = io.StringIO()
    doc = {"ok": True, "host": "box", "summary": "box looks ready"}
    doctor(doc, Console(file=out, width=80, no_color=True))
    assert out.getvalue() == "box: box looks ready\n"  # nothing between: said once


def test_a_local_preflight_fits_a_small_terminal(cli):
    r = cli("preflight", env={**os.environ, "COLUMNS": "80", "NO_COLOR": "1"})
    assert r.returncode in (0, 1), r.stderr
    assert len(r.stdout.splitlines()) <= 20, r.stdout
    assert "\x1b[" not in r.stdout


def test_profiles_are_a_table_with_a_header(cli):
    r = cli("profiles", env={**os.environ, "COLUMNS": "100"})
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["NAME", "KIND", "DETACH", "DURABLE", "STOP", "DELETES"]
    assert any(line.split()[:2] == ["autodl", "ssh-rental"] for line in lines)


def test_a_profile_states_what_deletes_data_before_anything_else(cli):
    """`profiles --name autodl` hid "destroy DELETES" and the 15-day auto-release 20 lines down."""
    lines = cli("profiles", "autodl", env={**os.environ, "COLUMNS": "80"}).stdout.splitlines()
    first_plain = next(i for i, line in enumerate(lines) if line.startswith(("ssh ", "paths ")))
    assert any(line.startswith("clock") and "15d" in line for line in lines[:first_plain])
    assert any(line.startswith("deletes") and "DELETES" in line for line in lines[:first_plain])


def test_gotcha_text_wraps_at_words_with_a_hanging_indent(cli):
    import re

    from gpuops import gotcha

    r = cli("gotcha", "U7", env={**os.environ, "COLUMNS": "60"})
    text = r.stdout
    assert all(len(line.rstrip()) <= 60 for line in text.splitlines())
    words = set(re.findall(r"[A-Za-z]{4,}", gotcha.get("U7").cause))
    shown = set(re.findall(r"[A-Za-z]{4,}", text))
    assert words <= shown, f"words broken across lines: {sorted(words - shown)[:5]}"
    continued = [line for line in text.splitlines() if line.startswith(" " * 12) and line.strip()]
    assert continued, "a wrapped value continues under itself"


def test_an_unreachable_host_says_how_to_see_why_and_several_hosts_end_with_one_line(cli):
    """An unreachable host was 10 s of nothing and then the client's last line, with no way on."""
    r = cli("preflight", "--host", "local,nobody@127.0.0.1:1", env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 3
    assert "(try: ssh -p 1 nobody@127.0.0.1 " in r.stderr and "--host local" in r.stderr
    assert r.stderr.count("\n") == 1
    last = r.stdout.splitlines()[-1]
    assert last.startswith("preflight on 2 hosts: ") and "nobody@127.0.0.1:1" in last


def test_an_unknown_job_points_to_status_and_a_refused_key_to_identity(cli):
    """An unknown job id said only "no job"; a wrong key gave no hint at all."""
    from gpuops.render import render_errors

    out = io.StringIO()
    render_errors({"host": "box", "error": {"kind": "auth-failed", "message": "box: Permission denied (publickey)"}},
                  out)
    assert out.getvalue() == ("gpuops: box: Permission denied (publickey) (the box took none of the keys offered: "
                              "give its key with --identity FILE or ssh-add it; ssh -v box shows which keys were "
                              "tried)\n")
    r = cli("logs", "--host", "local", "--job", "no-such-job", env={**os.environ, "GPUOPS_JOBS_DIR": "/nonexistent"})
    assert r.returncode == 4 and r.stderr.endswith(" (gpuops status --host local lists its jobs)\n"), r.stderr


def test_a_runs_row_says_its_attempt_last_event_and_what_its_telemetry_reads_now():
    from gpuops.render import jobs

    row = {"job_id": "j2", "state": "RUNNING", "age_s": 30,
           "run": {"id": "j1", "attempt": 2, "of": 4, "last_event": {"kind": "resumed", "at": 90.0,
                                                                    "checkpoint": "/ck/checkpoint-40"}},
           "telemetry": {"t": 99.0, "cpu": 180.0, "cores": 8, "rss": 3 << 30, "nproc": 5,
                         "gpus": [{"i": 0, "util": 97, "power": 250, "power_limit": 400, "mem": 30822}]}}
    doc = {"data": {"jobs": [row], "box_now": 100.0}, "summary": "j2: RUNNING", "ok": True}
    con = Console(file=io.StringIO(), width=140, color_system=None)
    jobs.status(doc, con)  # the table alone: a row per run, its attempt in the state
    text = con.file.getvalue()
    assert "RUNNING attempt 2/4" in text and "last event" not in text and "now:" not in text
    con = Console(file=io.StringIO(), width=140, color_system=None)
    jobs.status(doc, con, verbose=True)  # --verbose, or the one job asked about
    text = con.file.getvalue()
    assert "j2: attempt 2/4 of run j1; last event: resumed 10s ago (from /ck/checkpoint-40)" in text
    assert "j2: now: GPU0 97% 250/400 W 30.1 GiB, CPU 180% of 8 cores, RSS 3.0 GiB, 5 processes" in text
    row["run"]["activity"] = {"phase": "saving checkpoint", "since": 40.0, "step": 120}
    con = Console(file=io.StringIO(), width=160, color_system=None)
    jobs.status(doc, con, verbose=True)
    assert "(from /ck/checkpoint-40); phase: saving checkpoint for 1m" in con.file.getvalue()
