"""Guess which platform a box is on from facts about it: hostname, mount points, env names, files.

Pure: `guess(facts, profiles)` looks only at the facts dict it is given. A guess is something to
report ("this looks like AutoDL: /root/autodl-fs is mounted"), never a basis for a destructive
decision: verbs that delete or stop anything take an explicit --profile.

facts = {"hostname": str, "mounts": [mount point, ...], "env": [variable name, ...] (or a dict;
only the names are used), "files": [existing path, ...]}
"""

import re

# An env variable set by the platform is the most specific signal; a mount or file is next.
WEIGHTS = {"env": 3, "hostname": 2, "mounts": 2, "files": 2}


def _under(path: str, root: str) -> bool:
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root + "/")


def signals(profile, facts: dict) -> list:
    """The facts that point at `profile`, as (kind, text) pairs."""
    found = []
    hostname = facts.get("hostname") or ""
    for pattern in profile.guess.hostname:
        if hostname and re.search(pattern, hostname):
            found.append(("hostname", f"hostname {hostname} matches {pattern}"))
    mounts = list(facts.get("mounts") or ())
    for wanted in profile.guess.mounts:
        hit = next((m for m in mounts if _under(m, wanted)), None)
        if hit:
            found.append(("mounts", f"{hit} is mounted"))
    env_names = set(facts.get("env") or ())
    for name in profile.guess.env:
        if name in env_names:
            found.append(("env", f"${name} is set"))
    files = set(facts.get("files") or ())
    for path in profile.guess.files:
        if path in files:
            found.append(("files", f"{path} exists"))
    return found


def guess(facts: dict, profiles) -> list:
    """[{name, title, score, evidence}] for every profile with a signal, most likely first."""
    out = []
    for profile in profiles:
        hits = signals(profile, facts)
        if hits:
            out.append({"name": profile.name, "title": profile.title,
                        "score": sum(WEIGHTS[kind] for kind, _ in hits),
                        "evidence": [text for _, text in hits]})
    return sorted(out, key=lambda g: (-g["score"], g["name"]))


def probe_files(profiles) -> list:
    """Every file some profile looks for, so one remote command can test them all."""
    return sorted({path for p in profiles for path in p.guess.files})
