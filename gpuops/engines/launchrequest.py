"""A launch request as both faces ask for it, built and validated once.

`gpuops launch` (gpuops.cli.jobs) and the job_launch tool (gpuops.mcp.tools_jobs) take the same
request: a command or a script, labels, environment and secrets, GPUs, a progress regex, a
platform profile, an engine with its own flags, a run policy. Each face turns its own syntax into
these values (flags' KEY=VALUE words, a tool's objects; the server's roots and allowed secrets
first) and `build` judges them, in one order and in one set of words: the CLI's flags, which the
server rewords into the tool's parameters (gpuops.mcp.words). So a bad launch is refused the
same way on both (tests/test_launch_request.py).
"""

import os

from .. import engines
from ..errors import UsageError
from ..jobs import runpolicy, spec


def check_script(path, shown=None):
    """A script file this machine has and the box can run; `shown`: its name as the caller gave it."""
    shown = shown or path
    if not os.path.isfile(path):
        raise UsageError(f"--script {shown}: no such file")
    with open(path, "rb") as f:
        problem = spec.script_problem(f.read())
    if problem:
        raise UsageError(f"--script {shown}: {problem}")


def _words(values) -> list:
    """KEY=VALUE words from repeated flags, or from a tool's {KEY: VALUE} object."""
    if isinstance(values, dict):
        return [f"{k}={v}" for k, v in values.items()]
    return list(values or [])


def build(*, cmd, script, labels, env, secret_env, environ, progress_regex, profile, engine, resources,
          policy: dict, missing=None, script_shown=None) -> dict:
    """The request's values, each checked: {script, labels, env, secrets, profile (loaded), engine (an
    Engine), resources (the engine's own flags given, as given), policy (gpuops.jobs.runpolicy.build)}.
    `missing`: the usage error for no command (the CLI's names an example); `policy`: runpolicy.build's
    keyword arguments. --gpus is pins on one box and a count on a fleet: each use parses it
    (gpuops.jobs.spec.gpus, gpuops.placement)."""
    if not cmd and not script:
        raise missing or UsageError("launch needs --cmd (the command line to run, or --script FILE)")
    if cmd and script:
        raise UsageError("give one of --cmd or --script, not both")
    if script:
        check_script(script, script_shown)
    spec.check_regex(progress_regex)
    tags = spec.pairs(_words(labels), "--label")
    envs = spec.pairs(_words(env), "--env", env_names=True)
    secrets = spec.secrets(secret_env, environ, taken=envs)
    made = runpolicy.build(**policy)
    prof = None
    if profile:
        from .. import profiles

        prof = profiles.load(profile)
    eng = engines.get(engine) if engine else engines.for_profile(prof)
    asked = dict(resources or {})
    engines.refuse_foreign(eng, asked, "launch")
    return {"script": script, "labels": tags, "env": envs, "secrets": secrets, "profile": prof, "engine": eng, "resources": asked,
            "policy": made}
