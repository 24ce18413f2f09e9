"""gpuops as MCP tools for agents: the same operations as the CLI, one envelope per call.

`gpuops-mcp` (or `python -m gpuops.mcp`) serves them over stdio:

    gpuops-mcp [--toolsets check,jobs,postmortem|all] [--read-only | --no-destructive]

(gpuops.mcp.toolsets). The SDK is the optional extra `gpuops[mcp]`; without it the command says
so in one line and exits 2, as it does for an argument it does not know.
"""

import argparse
import sys

USAGE = 2


def parse(argv):
    from ..surface import TOOLSET_WORDS

    parser = argparse.ArgumentParser(
        prog="gpuops-mcp", description="gpuops's operations as MCP tools, over stdio.",
        epilog="toolsets: " + "; ".join(f"{k}: {v}" for k, v in TOOLSET_WORDS.items()))
    parser.add_argument("--toolsets", help="comma-separated toolsets to offer, 'all', or 'default' (check, jobs, "
                                           "postmortem); default: $GPUOPS_MCP_TOOLSETS, else the default")
    level = parser.add_mutually_exclusive_group()
    level.add_argument("--read-only", action="store_true", help="offer and allow only what reads (as "
                                                                "GPUOPS_MODE=readonly)")
    level.add_argument("--no-destructive", action="store_true", help="never end a process or delete data (as "
                                                                     "GPUOPS_MODE=no-destructive)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    try:
        from .server import build
        from .toolsets import NO_DESTRUCTIVE, READ_ONLY
    except ImportError as e:
        if (e.name or "").split(".")[0] != "mcp":
            raise
        print("gpuops-mcp: the MCP SDK is not installed; pip install 'gpuops[mcp]'", file=sys.stderr)
        sys.exit(USAGE)
    from ..errors import UsageError

    level = READ_ONLY if args.read_only else NO_DESTRUCTIVE if args.no_destructive else None
    try:
        server = build(toolsets=args.toolsets, level=level)
    except UsageError as e:
        print(f"gpuops-mcp: {e.message}", file=sys.stderr)
        sys.exit(USAGE)
    _sigint_for_copies()
    server.run()


def _sigint_for_copies() -> None:
    """A server started with SIGINT ignored (nohup, a parent's choice) would hand that on to every
    copy it starts (an ignored signal stays ignored across exec), and request_cancel's SIGINT would
    not stop them. A handler that does nothing keeps this process ignoring it, and is reset to the
    default in each child at exec, where Python makes it Ctrl-C again."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, _ignore)


def _ignore(signum: int, frame) -> None:
    """SIGINT, ignored by this server as it was when it started (see _sigint_for_copies)."""
