"""gpuops as MCP tools for agents: the same operations as the CLI, one envelope per call.

`gpuops-mcp` (or `python -m gpuops.mcp`) serves them over stdio. The SDK is the optional
extra `gpuops[mcp]`; without it the command says so in one line and exits 2.
"""

import sys


def main():
    try:
        from .server import build
    except ImportError as e:
        if (e.name or "").split(".")[0] != "mcp":
            raise
        print("gpuops-mcp: the MCP SDK is not installed; pip install 'gpuops[mcp]'", file=sys.stderr)
        sys.exit(2)
    build().run()
