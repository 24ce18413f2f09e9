"""A lying box: a real sshd whose PATH starts with tests/fixtures/rewriter, so gpuops's own code
runs there for real and only its answer is rewritten, as `rule` says (see rewrite.py there)."""

from pathlib import Path

REWRITER = Path(__file__).resolve().parents[1] / "fixtures" / "rewriter"


def rewriting_box(rig, name, rule, home, cache):
    """A box whose answers are rewritten by `rule` ("entry:REL", "job-id:ID"). Its HOME (`home`)
    has no shell rc, so the login shell keeps the PATH that SetEnv gives it; its digest cache is
    in `cache`."""
    return rig.box(name, env={"HOME": str(home), "XDG_CACHE_HOME": str(cache), "GPUOPS_REWRITE": rule,
                              "PATH": f"{REWRITER}:/usr/local/bin:/usr/bin:/bin"})
