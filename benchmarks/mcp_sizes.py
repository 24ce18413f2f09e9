"""What an agent pays in characters: the tool definitions per toolset, and each answer of one loop.

    python3 benchmarks/mcp_sizes.py [--json]

Through the official MCP client, in-process, on this machine (host 'local'). Definitions are the
JSON of each listed tool as the client receives it (name, title, description, input and output
schemas, annotations, _meta), per toolset and for the default set. The loop is launch -> wait -> logs -> triage -> diagnose -> stop -> pull -> verify on a
job that writes a log and a checkpoint directory and fails with a CUDA OOM; each answer is the
length of the text block a client shows the model. Run it on two checkouts (PYTHONPATH) to compare.
"""

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(os.environ.get("GPUOPS_CHECKOUT", ROOT)))

import anyio  # noqa: E402
from mcp import Client  # noqa: E402

from gpuops.mcp import server  # noqa: E402

JOB = ("mkdir -p {out}; for i in $(seq 1 300); do echo \"step $i/1000 loss 2.$i lr 3e-4\"; "
       "echo ckpt > {out}/ckpt-$i.pt; done; echo 'Traceback (most recent call last):'; "
       "echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB'; exit 1")


def definition_size(tool) -> int:
    """The tool as the client receives it (title, annotations and _meta included), compact JSON."""
    return len(json.dumps(tool.model_dump(by_alias=True, exclude_none=True, mode="json"), separators=(",", ":")))


def _build(toolsets):
    try:
        return server.build(toolsets=toolsets)
    except TypeError:  # a checkout without toolsets: every tool
        return server.build()


async def definitions():
    from gpuops import surface  # absent before toolsets existed

    sizes = {}
    for name in list(surface.TOOLSETS) + ["default", "all"]:
        async with Client(_build(name), raise_exceptions=True) as c:
            tools = (await c.list_tools()).tools
            sizes[name] = {"tools": len(tools), "chars": sum(definition_size(t) for t in tools)}
    return sizes


async def all_definitions():
    async with Client(_build("all"), raise_exceptions=True) as c:
        tools = (await c.list_tools()).tools
        return {"all": {"tools": len(tools), "chars": sum(definition_size(t) for t in tools)},
                "per_tool": {t.name: definition_size(t) for t in tools}}


async def loop(work: Path):
    out = work / "out"
    sizes = []
    async with Client(_build("all"), raise_exceptions=True) as c:
        async def call(tool, args):
            result = await c.call_tool(tool, args)
            text = result.content[0].text
            sizes.append((tool, len(text)))
            return json.loads(text)

        launched = await call("job_launch", {"host": "local", "cmd": JOB.format(out=out), "name": "sizes"})
        job = launched["data"]["job"]["job_id"]
        await call("job_wait", {"host": "local", "job": job, "timeout_s": 30})
        await call("job_logs", {"host": "local", "job": job})
        await call("log_triage", {"host": "local", "job": job})
        await call("job_diagnose", {"host": "local", "job": job})
        await call("job_stop", {"host": "local", "job": job})
        await call("data_pull", {"host": "local", "remote": str(out), "local": str(work / "back")})
        await call("data_verify", {"host": "local", "local": str(work / "back"), "remote": str(out)})
        # the other large answers the issue names (not part of the loop's total)
        extra = len(sizes)
        await call("host_preflight", {"host": "local"})
        await call("job_status", {"host": "local"})
    return sizes[:extra], sizes[extra:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "jobs").mkdir()
        os.environ.update(GPUOPS_JOBS_DIR=str(work / "jobs"), GPUOPS_MCP_ROOTS=str(work), GPUOPS_MCP_LOCAL="1")
        os.environ.pop("GPUOPS_MODE", None)
        try:
            defs = anyio.run(definitions)
        except ImportError:
            defs = anyio.run(all_definitions)
        answers, others = anyio.run(loop, work)
    if args.json:
        print(json.dumps({"definitions": defs, "loop": answers, "others": others}, indent=2))
        return
    print("definitions (chars of each tool as the client receives it):")
    for name, row in defs.items():
        if name != "per_tool":
            print(f"  {name:12} {row['tools']:3} tools {row['chars']:7,} chars")
    print("loop answers (chars of the text block):")
    for tool, size in answers:
        print(f"  {tool:14} {size:7,}")
    print(f"  {'total':14} {sum(s for _, s in answers):7,}")
    for tool, size in others:
        print(f"  ({tool:12} {size:7,})")


if __name__ == "__main__":
    main()
