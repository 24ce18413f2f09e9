"""`profiles` and `gotcha`: the platform facts and the gotcha reference, as envelopes and tables.

Both read local data only, except `profiles --host H`, which asks the box for its hostname,
mount points, environment variable names (never values) and a few marker files, in one command,
and reports which profile it resembles. The guess is reported, never applied.
"""

from typing import Optional

from .. import gotcha as gotchas
from ..envelope import envelope, step
from ..errors import HostError, NotFound

_SEP = "@@gpuops@@"


def _row(p) -> dict:
    from .. import profiles as P

    return {"name": p.name, "title": p.title, "kind": p.kind, "origin": p.origin,
            "meter_stop_verb": p.billing.meter_stop_verb, "meter_stop_is": p.billing.meter_stop_is,
            "meter_stop_deletes": [t.name for t in P.lost_tiers(p, "stop")],
            "detach": p.launch.detach, "data_dir": p.paths.data_dir, "durable_dir": p.paths.durable_dir}


def list_profiles() -> dict:
    from .. import profiles as P

    rows = [_row(p) for p in P.all_profiles()]
    return envelope("profiles", ok=True, summary=f"{len(rows)} profiles (user profiles: {P.user_dir()})",
                    data={"profiles": rows}, advice=["Name one profile to see it in full."])


def profiles(name: Optional[str] = None, host: Optional[str] = None, identity: Optional[str] = None) -> dict:
    """`profiles`: the platform each box of `host` resembles (a guess), else the profile `name` in
    full, else the list."""
    if host:
        from .hosts import on_hosts

        return on_hosts("profiles", host, guess_on, identity)
    return show_profile(name) if name else list_profiles()


def show_profile(name: str) -> dict:
    from .. import profiles as P
    from ..tomlschema import plain

    p = P.load(name)
    data = plain(p)
    data["deleted_by_meter_stop"] = [t.name for t in P.lost_tiers(p, "stop")]
    data["gotcha_titles"] = {g: gotchas.get(g).title for g in p.gotchas}
    verb = P.verb_label(p, "stop")
    lost = ", ".join(data["deleted_by_meter_stop"]) or "nothing"
    return envelope("profiles", ok=True, summary=f"{p.title}: {verb} deletes {lost}", data=data,
                    advice=[f"On a {p.title} box, give preflight and teardown-check the profile {p.name}: its paths "
                            f"and thresholds apply, and teardown-check says what {verb} would lose."])


def _facts_command(files) -> str:
    from ..remote.wrap import quote

    tests = " ".join(quote(f) for f in files)
    # Variable names only: values may hold secrets and never leave the box.
    return (f"(hostname 2>/dev/null || cat /proc/sys/kernel/hostname); echo {_SEP}; "
            f"awk '{{print $2}}' /proc/mounts 2>/dev/null; echo {_SEP}; "
            f"awk 'BEGIN {{ for (k in ENVIRON) print k }}'; echo {_SEP}; "
            f"for f in {tests}; do [ -e \"$f\" ] && printf '%s\\n' \"$f\"; done; true")


def parse_facts(text: str) -> dict:
    parts = (text.split(_SEP) + ["", "", "", ""])[:4]
    lines = [[ln.strip() for ln in part.strip().splitlines() if ln.strip()] for part in parts]
    mounts = [m.replace("\\040", " ") for m in lines[1]]
    return {"hostname": (lines[0] or [""])[0], "mounts": mounts, "env": lines[2], "files": lines[3]}


def guess_on(target) -> dict:
    from .. import profiles as P
    from ..profiles_guess import guess, probe_files

    profiles = P.all_profiles()
    result = target.run(_facts_command(probe_files(profiles)), timeout_s=30)
    if result.exit != 0:
        raise HostError(f"could not read box facts (exit {result.exit}): {result.err_text.strip()[:200]}")
    facts = parse_facts(result.text)
    ranked = guess(facts, profiles)
    facts_out = {"hostname": facts["hostname"], "mounts": len(facts["mounts"]), "files": facts["files"]}
    if not ranked:
        return envelope("profiles", ok=True, summary="no profile matches this box; generic-ssh is the safe choice",
                        data={"guess": None, "candidates": [], "facts": facts_out},
                        next=_guess_steps(target.name, "generic-ssh"))
    best = ranked[0]
    return envelope("profiles", ok=True,
                    summary=f"looks like {best['name']} ({'; '.join(best['evidence'])}); a guess, not applied: "
                            f"pass --profile {best['name']} to use it",
                    data={"guess": best["name"], "candidates": ranked[:5], "facts": facts_out},
                    next=_guess_steps(target.name, best["name"]))


def _guess_steps(host: str, name: str):
    return [step("gpuops", "profiles", "--name", name),
            step("gpuops", "preflight", "--host", host, "--profile", name, why="checks the box with that profile")]


def find_gotchas(query, limit: int = 5) -> dict:
    hits, total = gotchas.search(query, limit)
    if not hits:
        raise NotFound(f"no gotcha matches {query!r}; try an id (U7, AD4) or a word such as inode, xid, crlf")
    entries = [dict(e.as_dict(), **gotchas.handled(e)) for e in hits]
    more = f" (showing {len(hits)}; --limit for more)" if total > len(hits) else ""
    return envelope("gotcha", ok=True, summary=f"{total} gotcha(s) match {query!r}{more}",
                    data={"query": query, "total": total, "hits": entries},
                    next=[step("gpuops", "gotcha", "--query", h.id) for h in hits[1:3]])
