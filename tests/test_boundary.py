"""What a box answers is bounded and checked (gpuops.boundary): a lying box gets exit 3 with what
it said quoted, never a crash, a hang or this machine's memory. The lying box is a real sshd whose
PATH starts with tests/fixtures/liar (a python3 that answers as GPUOPS_LIE says, a timeout that
enforces nothing)."""

import json
import time
from pathlib import Path

import pytest

from gpuops import boundary, errors
from gpuops.remote import base
from gpuops.remote.targets import target_for

LIAR = Path(__file__).resolve().parent / "fixtures" / "liar"


@pytest.fixture(params=["openssh", "paramiko"])
def transport(request, monkeypatch):
    monkeypatch.setenv("GPUOPS_TRANSPORT", request.param)
    return request.param


@pytest.fixture(scope="module")
def liar(rig, tmp_path_factory):
    """A box that answers as `lie` says. Its HOME has no shell rc, so the login shell keeps the
    PATH that SetEnv gives it."""
    home = tmp_path_factory.mktemp("liar-home")
    boxes = {}

    def make(lie):
        if lie not in boxes:
            boxes[lie] = rig.box(f"liar-{lie}", env={"HOME": str(home), "GPUOPS_LIE": lie,
                                                     "PATH": f"{LIAR}:/usr/local/bin:/usr/bin:/bin"})
        return boxes[lie]
    return make


@pytest.mark.parametrize("lie, said", [
    ("garbage", "'Welcome to your GPU box!\\x01\\x02"),
    ("deep", "'[[[[[[[["),
    ("list", "'[1, 2, 3]'"),
])
def test_an_answer_that_is_not_gpuops_is_exit_3_quoting_it(cli, liar, lie, said):
    box = liar(lie)
    proc = cli("status", "--host", box.spec, "--json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 3 and doc["error"]["kind"] == "bad-answer", proc.stdout + proc.stderr
    assert "the box's answer is not gpuops's" in doc["error"]["message"] and said in doc["error"]["message"]
    assert "Traceback" not in proc.stderr


def test_an_answer_of_the_wrong_shape_names_the_field(cli, liar):
    proc = cli("status", "--host", liar("shape").spec, "--json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 3 and "'jobs' is a str" in doc["error"]["message"]


def test_a_job_id_from_the_box_is_checked_before_it_is_used(cli, liar):
    proc = cli("status", "--host", liar("job-id").spec, "--json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 3 and "job id '/tmp/x'" in doc["error"]["message"]


def test_an_endless_answer_is_cut_at_the_bound_not_read_into_memory(liar, monkeypatch, transport):
    """A box answering 400 MiB of JSON cost 1.26 GB here."""
    monkeypatch.setattr(base, "OUTPUT_BYTES", 4 << 20)
    t = target_for(liar("huge").spec)
    try:
        with pytest.raises(errors.BadAnswer) as err:
            t.run_onbox("job_facts", ["status"], timeout_s=30)
    finally:
        t.close()
    assert "answered more than 4.0 MiB" in err.value.message


def test_a_trickling_box_cannot_hold_a_call_past_its_deadline(liar, monkeypatch, transport):
    """A box that trickles a byte every 2 s and ignores `timeout` kept `status` running past 240 s
    over paramiko: every call now ends at its deadline plus the grace, on both transports."""
    monkeypatch.setattr(base, "GRACE_S", 1)
    t = target_for(liar("trickle").spec)
    started = time.monotonic()
    try:
        with pytest.raises(errors.TimedOut):
            t.run_onbox("job_facts", ["status"], timeout_s=1)
    finally:
        t.close()
    assert time.monotonic() - started < 1 + 5 + 1 + 10  # deadline, timeout's -k, grace, connect slack


def test_answer_parses_one_object_and_refuses_the_rest():
    assert boundary.answer(b'{"a": [1]}', "h") == {"a": [1]}
    for bad in (b"", b"null", b"[]", b"{", b"\xff\xfe", b"[" * 100_000):
        with pytest.raises(errors.BadAnswer):
            boundary.answer(bad, "h")


def test_expect_checks_types_and_nulls():
    doc = {"n": 3, "s": "x", "maybe": None, "flag": True}
    assert boundary.expect(doc, {"n": int, "s": str, "maybe": (int, type(None))}, "h") is doc
    for fields in ({"n": str}, {"missing": int}, {"flag": int}, {"maybe": int}):
        with pytest.raises(errors.BadAnswer):
            boundary.expect(doc, fields, "h")


def test_quote_is_short_and_printable():
    text = boundary.quote(b"\x00\x01abc" + b"x" * 500)
    assert text.startswith("'\\x00\\x01abc") and text.endswith("... (505 bytes)") and len(text) < 160
