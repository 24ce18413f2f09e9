"""The MCP contract beyond the calls: next steps as tool calls, errors in MCP's words, the schemas
tools/list advertises (and that each tool's answers keep to them), resources, the prompt, and
progress during verify and push. Driven through the SDK's own client, in-process."""

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is the optional extra gpuops[mcp]")

import jsonschema  # noqa: E402 - the SDK's client validates results with it
from mcp import Client  # noqa: E402

from gpuops import surface  # noqa: E402
from gpuops.mcp import adapter, answers, nextsteps, words  # noqa: E402
from tests.test_mcp import client, jobs_dir  # noqa: E402,F401 - the same fixtures

ALL = set(surface.tools())


@pytest.fixture(autouse=True)
def roots(tmp_path, monkeypatch):
    """The test's own directory is where the server may read and write locally."""
    monkeypatch.setenv("GPUOPS_MCP_ROOTS", str(tmp_path))


def doc_of(result):
    return json.loads(result.content[0].text)


# ---------------------------------------------------------------- next steps and words


def test_a_cli_step_becomes_the_tool_call_it_means():
    wait = ["gpuops", "wait", "--host", "b", "--job", "j", "--until", "terminal"]
    assert nextsteps.tool_step(wait, ALL) == {"tool": "job_wait", "args": {"host": "b", "job": "j"}}
    some = ["gpuops", "wait", "--host", "b", "--job", "j", "--until", "RUNNING,stalled", "--from-offset", "7"]
    assert nextsteps.tool_step(some, ALL)["args"] == {"host": "b", "job": "j", "until": ["RUNNING", "STALLED"],
                                                      "from_offset": 7}
    stop = ["gpuops", "stop", "--host", "b", "--job", "j", "--grace", "10", "--yes", "--plan", "P"]
    assert nextsteps.tool_step(stop, ALL) == {"tool": "job_stop", "args": {"host": "b", "job": "j", "grace_s": 10.0,
                                                                           "yes": True, "plan_id": "P"}}
    assert nextsteps.tool_step(["gpuops", "profiles", "--host", "b"], ALL) == {"tool": "profile_guess",
                                                                               "args": {"host": "b"}}
    push = ["gpuops", "push", "--host", "b", "--src", "/here", "--dst", "/there", "--exclude", "a", "--exclude", "b"]
    assert nextsteps.tool_step(push, ALL)["args"] == {"host": "b", "local": "/here", "remote": "/there",
                                                      "exclude": ["a", "b"]}
    # --fleet is fleet_launch's group of candidate boxes, and with --torchrun the gang's boxes
    gang = ["gpuops", "launch", "--fleet", "train", "--torchrun", "--cmd", "t.py"]
    assert nextsteps.tool_step(gang, ALL) == {"tool": "gang_launch", "args": {"fleet": "train", "cmd": "t.py"}}
    placed = ["gpuops", "launch", "--fleet", "train", "--gpus", "2", "--cmd", "t.py"]
    assert nextsteps.tool_step(placed, ALL)["tool"] == "fleet_launch"


def test_what_mcp_cannot_say_is_left_out_and_other_commands_keep_their_argv():
    assert nextsteps.tool_step(["gpuops", "logs", "--host", "b", "--job", "j", "--follow"], ALL) is None
    assert nextsteps.tool_step(["gpuops", "status", "--host", "b", "--job", "j", "--jobs-dir", "/d"], ALL) is None
    assert nextsteps.tool_step(["gpuops", "disconnect", "--host", "b"], ALL) is None
    assert nextsteps.tool_step(["gpuops", "logs", "--host", "b", "--job", "j", "--tail", "many"], ALL) is None
    assert nextsteps.tool_step(["scancel", "7"], ALL) == {"argv": ["scancel", "7"]}
    readonly = ALL - {"job_stop"}  # a tool this server does not list is never named
    assert nextsteps.tool_step(["gpuops", "stop", "--host", "b", "--job", "j"], readonly) is None
    steps = [{"argv": ["gpuops", "diagnose", "--host", "b", "--job", "j"], "why": "why it stopped"},
             {"argv": ["gpuops", "logs", "--host", "b", "--job", "j", "--follow"]}]
    assert nextsteps.translate(steps, ALL) == [{"tool": "job_diagnose", "args": {"host": "b", "job": "j"},
                                                "why": "why it stopped"}]


def test_an_error_raised_for_the_cli_reads_in_parameters():
    said = words.reword("launch", "--secret-env HF: HF is not set; HF is given both as --env and as --secret-env")
    assert said == "secret_env HF: HF is not set; HF is given both as env and as secret_env"
    assert words.reword("stop", "--plan 'x' is not a plan id") == "plan_id 'x' is not a plan id"
    assert words.reword("push", "--src is required; --no-budget") == "local is required; no_budget"


@pytest.mark.anyio
async def test_usage_errors_from_operations_name_mcp_parameters(client, jobs_dir, monkeypatch):
    monkeypatch.setenv("GPUOPS_TEST_A", "1")
    monkeypatch.setenv("GPUOPS_MCP_SECRETS", "GPUOPS_TEST_A")
    for name, args, word in (("job_launch", {"host": "local", "cmd": "true", "gpus": "0 1"}, "gpus wants"),
                             ("job_launch", {"host": "local", "cmd": "true", "share_gpu": True}, "share_gpu goes with gpus"),
                             ("job_launch", {"host": "local", "cmd": "true", "env": {"GPUOPS_TEST_A": "2"},
                                            "secret_env": ["GPUOPS_TEST_A"]}, "both as env and as secret_env"),
                             ("job_stop", {"host": "local", "job": "j", "yes": True, "plan_id": "nope"}, "plan_id"),
                             ("log_triage", {"path": "x.log", "job": "j"}, "exactly one of path or job"),
                             ("data_push", {"host": "local", "local": "src", "remote": "/tmp/x", "plan_id": "p"},
                              "goes with delete")):
        result = await client.call_tool(name, args)
        doc = doc_of(result)
        assert result.is_error and doc["error"]["kind"] == "usage" and word in doc["summary"], (name, doc["summary"])
        assert "--" not in doc["summary"] and doc["summary"] == doc["error"]["message"], doc["summary"]
    assert list(jobs_dir.iterdir()) == []


# ---------------------------------------------------------------- schemas


def _walk(node, path=""):
    if isinstance(node, dict):
        yield path, node
        for k, v in node.items():
            yield from _walk(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, f"{path}[{i}]")


@pytest.mark.anyio
async def test_every_parameter_is_described_and_no_optional_advertises_null(client):
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == ALL
    for name, tool in tools.items():
        for param, prop in tool.input_schema["properties"].items():
            assert prop.get("description"), f"{name}.{param} has no description"
        assert not [p for p, n in _walk(tool.input_schema) if "default" in n and n["default"] is None], name
        jsonschema.Draft202012Validator.check_schema(tool.input_schema)
        jsonschema.Draft202012Validator.check_schema(tool.output_schema)
    profiles = tools["host_preflight"].input_schema["properties"]["profile"]["enum"]
    assert "autodl" in profiles and profiles == tools["profiles_show"].input_schema["properties"]["name"]["enum"]
    assert tools["teardown_check"].input_schema["properties"]["verb"]["enum"] == ["stop", "pause", "destroy"]
    assert "RUNNING" in tools["job_wait"].input_schema["properties"]["until"]["items"]["enum"]
    assert tools["job_logs"].output_schema != tools["job_wait"].output_schema  # typed per tool
    assert tools["job_wait"].output_schema["properties"]["data"]["properties"]["timed_out"] == {"type": "boolean"}


@pytest.mark.anyio
async def test_log_triage_advertises_exactly_one_of_path_or_job(client):
    tool = next(t for t in (await client.list_tools()).tools if t.name == "log_triage")
    check = jsonschema.Draft202012Validator(tool.input_schema)
    assert check.is_valid({"path": "a.log"}) and check.is_valid({"job": "j", "host": "b"})
    for wrong in ({}, {"path": "a.log", "job": "j"}, {"path": "a.log", "host": "b"}, {"host": "b"}):
        assert not check.is_valid(wrong), wrong


def _undeclared(tool, doc):
    declared = {code.split(":")[0] for code in answers.known()[tool].split()}
    return sorted(set(doc["data"]) - declared)


@pytest.mark.anyio
async def test_each_tools_answers_keep_to_its_declared_data(client, jobs_dir, tmp_path):
    """The client validates types; this holds the keys too, so a key an operation adds is declared."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.txt").write_text("a\n")
    log = tmp_path / "train.log"
    log.write_text("step 1\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    launched = await client.call_tool("job_launch", {"host": "local", "cmd": "echo hi; exit 3"})
    job = doc_of(launched)["data"]["job"]["job_id"]
    calls = [("job_launch", launched),
             ("job_wait", {"host": "local", "job": job, "timeout_s": 20}),
             ("job_status", {"host": "local", "job": job}), ("job_status", {"host": "local"}),
             ("job_logs", {"host": "local", "job": job}), ("job_stop", {"host": "local", "job": job}),
             ("job_diagnose", {"host": "local", "job": job}), ("log_triage", {"host": "local", "job": job}),
             ("log_triage", {"path": str(log)}), ("job_retry", {"host": "local", "job": job}),
             ("job_queue", {"host": "local", "name": "q", "commands": ["true"], "wait_s": 20}),
             ("host_preflight", {"host": "local", "paths": [str(tmp_path)]}),
             ("gotcha_lookup", {"query": "inode"}), ("profiles_show", {}), ("profiles_show", {"name": "autodl"}),
             ("teardown_check", {"host": "pod", "profile": "runpod", "keep": ["/workspace/x"]}),
             ("data_verify", {"host": "local", "local": str(tree), "remote": str(tree)}),
             ("data_push", {"host": "local", "local": str(tree), "remote": str(tmp_path / "copy")}),
             ("data_pull", {"host": "local", "remote": str(tmp_path / "copy"), "local": str(tmp_path / "back")})]
    for name, args in calls:
        result = args if not isinstance(args, dict) else await client.call_tool(name, args)
        doc = result.structured_content
        assert result.is_error is False, (name, doc["summary"])  # and the client validated it against the schema
        assert _undeclared(name, doc) == [], (name, doc["summary"])
        for item in doc["next"]:  # a step names a listed tool and only its parameters, or a plain command
            assert "argv" in item or set(item["args"]) <= _params(item["tool"]), item


def _params(tool):
    return {a.name for a in surface.args(tool)}


# ---------------------------------------------------------------- resources and the prompt


@pytest.mark.anyio
async def test_profiles_and_gotchas_are_resources(client):
    listed = {str(r.uri) for r in (await client.list_resources()).resources}
    assert "gpuops://profile/autodl" in listed and "gpuops://profile/runpod" in listed
    templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
    assert templates == {"gpuops://profile/{name}", "gpuops://gotcha/{id}"}
    autodl = json.loads((await client.read_resource("gpuops://profile/autodl")).contents[0].text)
    assert autodl["name"] == "autodl" and autodl["deleted_by_meter_stop"] is not None
    u7 = json.loads((await client.read_resource("gpuops://gotcha/U7")).contents[0].text)
    assert u7["id"] == "U7" and "inode" in u7["title"].lower() and "checked_by" in u7
    with pytest.raises(Exception, match="no gotcha"):
        await client.read_resource("gpuops://gotcha/NOPE99")


@pytest.mark.anyio
async def test_the_post_mortem_prompt_names_the_tools_in_order(client):
    (prompt,) = (await client.list_prompts()).prompts
    assert prompt.name == "post_mortem" and {a.name for a in prompt.arguments} == {"host", "job"}
    text = (await client.get_prompt("post_mortem", {"host": "gpu1", "job": "train-7"})).messages[0].content.text
    order = [text.index(tool) for tool in ("job_status", "job_diagnose", "log_triage", "job_logs")]
    assert order == sorted(order) and '"job": "train-7"' in text and '"host": "gpu1"' in text


# ---------------------------------------------------------------- progress


@pytest.mark.anyio
async def test_verify_and_push_send_progress_saying_what_they_do(client, jobs_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(adapter, "PROGRESS_EVERY_S", 0.01)
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(300):
        (tree / f"f{i}.bin").write_bytes(os.urandom(4096))
    for name, args in (("data_verify", {"host": "local", "local": str(tree), "remote": str(tree)}),
                       ("data_push", {"host": "local", "local": str(tree), "remote": str(tmp_path / "copy")})):
        beats = []

        async def seen(progress, total, message):
            beats.append((progress, message))

        result = await client.call_tool(name, args, progress_callback=seen)
        assert result.is_error is False and result.structured_content["ok"], result.structured_content["summary"]
        assert beats, name
        assert [p for p, _ in beats] == sorted({p for p, _ in beats})  # strictly increasing
        assert all(m for _, m in beats) and any(str(tmp_path) in m or "verif" in m for _, m in beats), beats


@pytest.mark.anyio
async def test_readonly_mode_refuses_push_and_pull_at_call_time(client, jobs_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUOPS_MODE", "readonly")
    (tmp_path / "src").mkdir()
    for name, args in (("data_push", {"host": "local", "local": str(tmp_path / "src"), "remote": str(tmp_path / "d")}),
                       ("data_pull", {"host": "local", "remote": str(tmp_path / "src"), "local": str(tmp_path / "e")}),
                       ("job_queue", {"host": "local", "name": "q", "commands": ["touch x"]})):
        doc = doc_of(await client.call_tool(name, args))
        assert doc["error"]["kind"] == "refused", name
    assert not (tmp_path / "d").exists() and not (tmp_path / "e").exists()


def test_the_readmes_allow_list_is_exactly_the_read_only_tools():
    import re

    from tests.test_mcp import READ_ONLY

    readme = Path(__file__).resolve().parent.parent / "README.md"
    allowed = set(re.findall(r'"mcp__gpuops__(\w+)"', readme.read_text(encoding="utf-8")))
    assert allowed == READ_ONLY
    assert READ_ONLY == {name for name, t in surface.tools().items() if t.effect == "reads"}
