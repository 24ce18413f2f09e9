"""The large answers, compact by default (gpuops.mcp.trim), through the SDK's client: host_preflight
answered 11-12k characters and job_wait 9.2k with no way to trim, and a log that is not UTF-8 lost
bytes (`text_exact: false`, no other way to read them)."""

import base64
import json

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is the optional extra gpuops[mcp]")

import anyio  # noqa: E402
from mcp import Client  # noqa: E402

from gpuops.checks.shape import FACTS  # noqa: E402
from gpuops.mcp import server, trim  # noqa: E402
from tests.fixtures.fakegpu.boxes import compose  # noqa: E402
from tests.test_mcp import jobs_dir  # noqa: E402,F401 - the same fixture

COMPACT = 8_000  # characters a compact default answer stays under


async def answer(c, tool, args):
    result = await c.call_tool(tool, args)
    assert result.is_error is False, result.content[0].text
    return json.loads(result.content[0].text), len(result.content[0].text)


@pytest.mark.anyio
async def test_a_sick_gpu_box_preflight_is_compact_unless_asked_for_all(tmp_path, monkeypatch, real_processes):
    _, env = compose(tmp_path, "v1-oom", "hw-slowdown")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    async with Client(server.build(), raise_exceptions=True) as c:
        short, size = await answer(c, "host_preflight", {"host": "local"})
        full, full_size = await answer(c, "host_preflight", {"host": "local", "fields": ["*"], "failed_only": False})
        picked, _ = await answer(c, "host_preflight", {"host": "local", "fields": ["disks", "cgroup"]})
    assert size < COMPACT < full_size, (size, full_size)
    assert short["ok"] is False and short["summary"] == full["summary"]  # the verdict is the same
    assert {f["severity"] for f in short["findings"]} <= {"warn", "fail"} and short["findings"]
    assert [f["id"] for f in short["findings"]] == [f["id"] for f in full["findings"] if f["severity"] in
                                                    ("warn", "fail")]
    omitted = short["data"]["omitted"]
    assert omitted["findings"] == len(full["findings"]) - len(short["findings"])
    assert set(short["data"]) - {"omitted"} <= set(trim.COMPACT["host_preflight"])
    assert set(omitted["keys"]) == set(full["data"]) - set(short["data"])
    assert {"gpu", "disks", "cgroup", "memory", "kernlog"} <= set(full["data"]) <= set(FACTS) | {
        "thresholds", "profile", "engines"} and "omitted" not in full["data"]
    assert set(picked["data"]) - {"omitted"} == {"disks", "cgroup"}


@pytest.mark.anyio
async def test_wait_and_status_answer_compactly_and_give_what_they_left_out(jobs_dir, real_processes):
    script = "import sys; [print('step %d/900 loss 2.%04d ' % (i, i) + 'x' * 60) for i in range(900)]"
    async with Client(server.build(), raise_exceptions=True) as c:
        ids = []
        for i in range(12):
            made, _ = await answer(c, "job_launch", {"host": "local", "cmd": f'python3 -c "{script}"',
                                                     "name": f"run-{i}", "labels": {"sweep": "lr"}})
            ids.append(made["data"]["job"]["job_id"])
        with anyio.fail_after(60):
            waited, size = await answer(c, "job_wait", {"host": "local", "job": ids[-1], "timeout_s": 30})
            whole, whole_size = await answer(c, "job_wait", {"host": "local", "job": ids[-1], "timeout_s": 30,
                                                             "fields": ["*"], "max_bytes": 24_000})
        # job_status lists the newest 5 unless asked for more (tests/test_mcp_lineage.py): here all 12
        listed, listed_size = await answer(c, "job_status", {"host": "local", "labels": {"sweep": "lr"}, "limit": 12})
        rows, rows_size = await answer(c, "job_status", {"host": "local", "fields": ["*"], "limit": 12})
        failing, _ = await answer(c, "job_status", {"host": "local", "failed_only": True})
    assert waited["data"]["state"] == "COMPLETED" and size < COMPACT < whole_size, (size, whole_size)
    assert set(waited["data"]["job"]) <= set(trim.ROW) and "command" in whole["data"]["job"]
    assert "command" in waited["data"]["omitted"]["row_keys"] and whole["data"]["job"]["job_id"] == ids[-1]
    assert "until" in waited["data"]["omitted"]["keys"]
    assert waited["data"]["next_offset"] == whole["data"]["next_offset"]
    assert len(waited["data"]["new_text"].encode()) <= 4000 and whole["data"]["new_text"].endswith(
        waited["data"]["new_text"])
    assert len(listed["data"]["jobs"]) == 12 and listed_size < COMPACT < rows_size, (listed_size, rows_size)
    assert all(set(r) <= set(trim.ROW) for r in listed["data"]["jobs"]) and "command" in rows["data"]["jobs"][0]
    assert "command" in listed["data"]["omitted"]["row_keys"]
    assert failing["data"]["jobs"] == [] and failing["data"]["omitted"]["jobs"] == 12  # all of them completed


@pytest.mark.anyio
async def test_a_log_that_is_not_utf8_pages_exactly_as_base64(jobs_dir, real_processes):
    script = r"import sys; sys.stdout.buffer.write(b'caf\xe9 latin-1\n\xff\xfe binary\nend\n')"
    async with Client(server.build(), raise_exceptions=True) as c:
        made, _ = await answer(c, "job_launch", {"host": "local", "cmd": f'python3 -c "{script}"'})
        jid = made["data"]["job"]["job_id"]
        with anyio.fail_after(30):
            await answer(c, "job_wait", {"host": "local", "job": jid, "timeout_s": 20})
        text, _ = await answer(c, "job_logs", {"host": "local", "job": jid, "from_offset": 0})
        raw, _ = await answer(c, "job_logs", {"host": "local", "job": jid, "from_offset": 0, "encoding": "base64"})
    on_disk = (jobs_dir / jid / "log").read_bytes()
    assert text["data"]["text_exact"] is False and "\ufffd" in text["data"]["text"]
    assert raw["data"]["text_exact"] is True and "text" not in raw["data"]
    assert base64.b64decode(raw["data"]["bytes_b64"]) == on_disk == b"caf\xe9 latin-1\n\xff\xfe binary\nend\n"
    assert raw["data"]["next_offset"] == len(on_disk) and raw["data"]["text_starts_at"] == 0


@pytest.mark.anyio
async def test_a_launch_answers_in_under_2000_characters_with_the_policy_as_given(jobs_dir, real_processes):
    """job_launch answered 3,133 characters, 1,491 of them meta with a 494-character Xid table."""
    async with Client(server.build(toolsets="all"), raise_exceptions=True) as c:
        doc, size = await answer(c, "job_launch", {"host": "local", "cmd": "sleep 1", "max_retries": 2,
                                                   "stall_after_s": 20})
    assert size < 2_000, size
    meta = doc["data"]["meta"]
    assert meta["policy"]["max_retries"] == 2 and "xid_kinds" not in meta["policy"], meta["policy"]
    assert "policy.xid_kinds" in doc["data"]["omitted"]["meta_keys"] and "cgroups" not in meta
    assert doc["data"]["job"]["job_id"] == meta["job_id"] and doc["next"][0]["tool"] == "job_wait"
