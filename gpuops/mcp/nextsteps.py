"""The CLI's words as MCP's: a next step's argv as a tool call, a usage message's flags as parameters.

Operations speak the CLI (gpuops.envelope.step: `gpuops stop --host b --job j --yes --plan P`);
an agent on MCP calls tools. One table says which tool and parameter each verb and flag is, and
serves both directions of use: translating `next`, and rewording an error an operation raised
about `--secret-env` as one about `secret_env`. A gpuops step with a verb, flag or value this
table cannot carry (`--jobs-dir`, `logs --follow`, a verb MCP lacks) is left out rather than
shown in CLI syntax; a step that is not gpuops (`scancel 7`) has no tool and keeps its argv.
"""

import re

S, I, F, B, L, STATES = "str", "int", "float", "flag", "list", "states"
CSV, IMPLIED = "csv", "implied"  # 'a,b' as a list; a flag the tool itself means (no parameter)
_GANG = ("gang", S)
_HOST, _JOB = ("host", S), ("job", S)
_SYNC = {"--host": _HOST, "--exclude": ("exclude", L), "--include-git": ("include_git", B)}
_TRANSFER = dict(_SYNC, **{"--delete": ("delete", B), "--yes": ("yes", B), "--plan": ("plan_id", S)})
_SECRETS = {"--env": ("env", "pairs"), "--secret-env": ("secret_env", L)}

# CLI verb -> [(tool, {flag: (parameter, kind)})], tried in order: the first whose flags cover the
# step's is the call. Kinds: a flag without a value is B; L repeats; "pairs" is KEY=VALUE.
VERBS = {
    "preflight": [("host_preflight", {"--host": _HOST, "--profile": ("profile", S), "--path": ("paths", L)})],
    "fleet": [("fleet_status", {"--fleet": ("fleet", S), "--window": ("window_s", F)})],
    "launch": [("job_launch", dict(_SECRETS, **{"--host": _HOST, "--cmd": ("cmd", S), "--name": ("name", S),
                                                "--key": ("key", S), "--workdir": ("workdir", S),
                                                "--gpus": ("gpus", S), "--share-gpu": ("share_gpu", B)})),
               ("fleet_launch", dict(_SECRETS, **{"--fleet": ("fleet", S), "--gpus": ("gpus", I),
                                                  "--gpu-type": ("gpu_type", S), "--min-vram-gib": ("min_vram_gib", F),
                                                  "--cmd": ("cmd", S), "--name": ("name", S), "--key": ("key", S),
                                                  "--workdir": ("workdir", S)})),
               ("gang_launch", dict(_SECRETS, **{"--host": ("hosts", CSV), "--fleet": ("fleet", S),
                                                 "--torchrun": (None, IMPLIED),
                                                 "--cmd": ("cmd", S), "--nproc-per-node": ("nproc_per_node", I),
                                                 "--rdzv-port": ("rdzv_port", I), "--rdzv-host": ("rdzv_host", S),
                                                 "--code": ("code", S), "--workdir": ("workdir", S),
                                                 "--name": ("name", S)}))],
    "status": [("job_status", {"--host": _HOST, "--job": _JOB, "--limit": ("limit", I)}),
               ("gang_status", {"--gang": _GANG})],
    "logs": [("job_logs", {"--host": _HOST, "--job": _JOB, "--tail": ("tail", I), "--from-offset": ("from_offset", I),
                           "--max-bytes": ("max_bytes", I)}),
             ("gang_logs", {"--gang": _GANG, "--tail": ("tail", I), "--cursors": ("cursors", S),
                            "--max-bytes": ("max_bytes", I)})],
    "wait": [("job_wait", {"--host": _HOST, "--job": _JOB, "--until": ("until", STATES), "--log-regex": ("log_regex", S),
                           "--from-offset": ("from_offset", I), "--timeout": ("timeout_s", F),
                           "--max-bytes": ("max_bytes", I)}),
             ("gang_wait", {"--gang": _GANG, "--until": ("until", STATES), "--timeout": ("timeout_s", F)})],
    "stop": [("job_stop", {"--host": _HOST, "--job": _JOB, "--grace": ("grace_s", F), "--yes": ("yes", B),
                           "--plan": ("plan_id", S)}),
             ("gang_stop", {"--gang": _GANG, "--grace": ("grace_s", F), "--yes": ("yes", B),
                            "--plan": ("plan_id", S)})],
    "retry": [("job_retry", dict(_SECRETS, **{"--host": _HOST, "--job": _JOB, "--resume-arg": ("resume_arg", S),
                                              "--key": ("key", S)})),
              ("gang_retry", dict(_SECRETS, **{"--gang": _GANG, "--resume-arg": ("resume_arg", S)}))],
    "queue": [("job_queue", dict(_SECRETS, **{"--host": _HOST, "--name": ("name", S), "--wait": ("wait_s", F),
                                              "--cancel": ("cancel", B), "--workdir": ("workdir", S),
                                              "--gpus": ("gpus", S)}))],
    "diagnose": [("job_diagnose", {"--host": _HOST, "--job": _JOB}), ("gang_diagnose", {"--gang": _GANG})],
    "triage": [("log_triage", {"--host": _HOST, "--job": _JOB, "--log": ("path", S)})],
    "reap": [("vram_reap", {"--host": _HOST, "--gpu": ("gpu", I), "--min-age": ("min_age_s", F),
                            "--idle-window": ("idle_window_s", F), "--term-wait": ("term_wait_s", F),
                            "--yes": ("yes", B), "--plan": ("plan_id", S)})],
    "gotcha": [("gotcha_lookup", {"--query": ("query", S), "--limit": ("limit", I)})],
    "profiles": [("profiles_show", {"--name": ("name", S)}), ("profile_guess", {"--host": _HOST})],
    "teardown-check": [("teardown_check", {"--host": _HOST, "--profile": ("profile", S), "--keep": ("keep", L),
                                           "--verb": ("verb", S)})],
    "verify": [("data_verify", dict(_SYNC, **{"--src": ("local", S), "--dst": ("remote", S), "--local": ("local", S),
                                              "--remote": ("remote", S)}))],
    "push": [("data_push", dict(_TRANSFER, **{"--src": ("local", S), "--dst": ("remote", S),
                                              "--fix-crlf": ("fix_crlf", B), "--profile": ("profile", S)}))],
    "pull": [("data_pull", dict(_TRANSFER, **{"--src": ("remote", S), "--dst": ("local", S)}))],
}


def tool_step(argv, listed):
    """The MCP form of one step's argv: {"tool", "args"}; the argv itself for a command that is not
    gpuops; None for a gpuops command no listed tool can make."""
    if not argv or argv[0] != "gpuops":
        return {"argv": list(argv)}
    for tool, flags in VERBS.get(argv[1] if len(argv) > 1 else "", []):
        if tool in listed:
            args = _args(argv[2:], flags)
            if args is not None:
                return {"tool": tool, "args": args}
    return None


def translate(steps, listed):
    """A document's `next` for an MCP caller (see tool_step); `why` is kept."""
    out = []
    for item in steps:
        made = tool_step(item["argv"], listed)
        if made is not None and made not in out:
            out.append(dict(made, why=item["why"]) if item.get("why") else made)
    return out


def _args(words, flags):
    args, i = {}, 0
    while i < len(words):
        spec = flags.get(words[i])
        if spec is None:
            return None
        name, kind = spec
        if kind == IMPLIED:
            i += 1
            continue
        if kind == B:
            args[name], i = True, i + 1
            continue
        if i + 1 >= len(words):
            return None
        if kind == STATES and words[i + 1].lower() == "terminal":
            i += 2  # job_wait's own default: a call without `until`
            continue
        value = _value(kind, words[i + 1], args.get(name))
        if value is None:
            return None
        args[name], i = value, i + 2
    return args


def _value(kind, word, before):
    try:
        if kind == I:
            return int(word)
        if kind == F:
            return float(word)
    except ValueError:
        return None
    if kind == L:
        return (before or []) + [word]
    if kind == CSV:
        return [w for w in word.split(",") if w] or None
    if kind == "pairs":
        key, sep, value = word.partition("=")
        return dict(before or {}, **{key: value}) if sep and key else None
    if kind == STATES:
        return [w.strip().upper() for w in word.split(",")]
    return word


def parameters(verb):
    """{--flag: parameter} over every tool a verb maps to."""
    return {flag: name for _, flags in VERBS.get(verb, []) for flag, (name, _) in flags.items() if name}


def reword(verb, text):
    """`text` with each CLI flag of `verb` named as its MCP parameter: an error an operation raised
    for the CLI, as the MCP caller should read it."""
    names = parameters(verb)
    return re.sub(r"--[a-z][a-z-]*", lambda m: names.get(m.group(), m.group()), text)
