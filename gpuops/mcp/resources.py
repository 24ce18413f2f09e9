"""Reference an agent reads rather than calls: profiles and gotchas as resources, and one prompt.

`gpuops://profile/{name}` is a platform profile in full and `gpuops://gotcha/{id}` one gotcha
(both JSON, the data profiles_show and gotcha_lookup return); each profile is also listed, the
~150 gotchas only through their template. The prompt `post_mortem` walks a model through why a
job ended, with the tools in the order that answers it.
"""

import json

from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.server.mcpserver.resources import FunctionResource

from .. import errors

PROFILE_URI = "gpuops://profile/{name}"
GOTCHA_URI = "gpuops://gotcha/{id}"
JSON = "application/json"


def profile_text(name: str) -> str:
    from ..ops import catalog

    try:
        return json.dumps(catalog.show_profile(name)["data"], ensure_ascii=False)
    except errors.GpuopsError as e:  # no such profile, or a user's profile that does not load
        raise ResourceNotFoundError(e.message) from None


def gotcha_text(id: str) -> str:  # noqa: A002 - the template's variable is {id}
    from .. import gotcha

    entry = gotcha.get(id)
    if entry is None:
        raise ResourceNotFoundError(f"no gotcha {id!r}; gotcha_lookup searches them by words")
    return json.dumps(dict(entry.as_dict(), **gotcha.handled(entry)), ensure_ascii=False)


def post_mortem(host: str, job: str) -> str:
    """Find out why a job on a box ended, with evidence, and what to change before running it again."""
    return (f"Job {job} on host {host} has ended or is misbehaving. Find out why, with evidence.\n"
            f"1. job_status {{\"host\": \"{host}\", \"job\": \"{job}\"}}: its state. If it is still RUNNING, "
            "job_wait on it (repeat while timed_out) unless it looks stalled.\n"
            f"2. job_diagnose {{\"host\": \"{host}\", \"job\": \"{job}\"}}: the verdict (OOM kill, reboot, Xid, disk "
            "full, a stop someone asked for, its own exit), its evidence and what was ruled out.\n"
            f"3. log_triage {{\"host\": \"{host}\", \"job\": \"{job}\"}}: the failure class in its log, the first "
            "error line, how far training got.\n"
            "4. Only if those disagree or stay vague: job_logs around the lines they cite (from_offset pages "
            "exactly), and gotcha_lookup for a gotcha id a finding names.\n"
            "Then answer in this order: the cause in one sentence; the evidence (log lines, counters, records) "
            "that shows it; what was ruled out; the change to make before a retry (job_retry runs the same "
            "command again). Follow each result's `next` when it fits, and say when the evidence is thin.")


def register(server) -> None:
    """Add the resources, their templates and the prompt to `server` (an MCPServer)."""
    from .. import profiles

    server.resource(PROFILE_URI, name="profile", mime_type=JSON,
                    description="a platform profile in full (paths, billing, what its stop deletes)")(profile_text)
    server.resource(GOTCHA_URI, name="gotcha", mime_type=JSON,
                    description="one known GPU-box gotcha: symptom, cause, fix, how gpuops checks it")(gotcha_text)
    for p in profiles.all_profiles():
        server.add_resource(FunctionResource.from_function(
            lambda name=p.name: profile_text(name), uri=PROFILE_URI.format(name=p.name), name=f"profile {p.name}",
            title=p.title, mime_type=JSON, description=f"the {p.title} platform profile"))
    server.prompt(name="post_mortem", title="Post-mortem a job")(post_mortem)
