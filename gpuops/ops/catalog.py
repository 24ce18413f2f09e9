"""`profiles` and `gotcha`: the platform facts and the gotcha reference, as envelopes and tables.

Both read local data only, except `profiles --host H`, which asks the box for its hostname,
mount points, environment variable names (never values) and a few marker files, in one command,
and reports which profile it resembles. The guess is reported, never applied.
"""

from .. import gotcha as gotchas
from .. import profiles as P
from ..envelope import envelope
from ..errors import HostError, NotFound
from ..profiles_guess import guess, probe_files
from ..tomlschema import plain

_SEP = "@@gpuops@@"


def _row(p) -> dict:
    return {"name": p.name, "title": p.title, "kind": p.kind, "origin": p.origin,
            "meter_stop_verb": p.billing.meter_stop_verb, "meter_stop_is": p.billing.meter_stop_is,
            "meter_stop_deletes": [t.name for t in P.lost_tiers(p, "stop")],
            "detach": p.launch.detach, "data_dir": p.paths.data_dir, "durable_dir": p.paths.durable_dir}


def list_profiles() -> dict:
    rows = [_row(p) for p in P.all_profiles()]
    return envelope("profiles", ok=True, summary=f"{len(rows)} profiles (user profiles: {P.user_dir()})",
                    data={"profiles": rows}, next=["gpuops profiles --name NAME"])


def show_profile(name: str) -> dict:
    p = P.load(name)
    data = plain(p)
    data["deleted_by_meter_stop"] = [t.name for t in P.lost_tiers(p, "stop")]
    data["gotcha_titles"] = {g: gotchas.get(g).title for g in p.gotchas}
    verb = P.verb_label(p, "stop")
    lost = ", ".join(data["deleted_by_meter_stop"]) or "nothing"
    return envelope("profiles", ok=True, summary=f"{p.title}: {verb} deletes {lost}", data=data,
                    next=[f"gpuops preflight --host H --profile {p.name}",
                          f"gpuops teardown-check --host H --profile {p.name} --keep PATH"])


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
                        next=["gpuops profiles --name generic-ssh"])
    best = ranked[0]
    return envelope("profiles", ok=True,
                    summary=f"looks like {best['name']} ({'; '.join(best['evidence'])}); a guess, not applied: "
                            f"pass --profile {best['name']} to use it",
                    data={"guess": best["name"], "candidates": ranked[:5], "facts": facts_out},
                    next=[f"gpuops profiles --name {best['name']}"])


def find_gotchas(query: str, limit: int = 5) -> dict:
    hits, total = gotchas.search(query, limit)
    if not hits:
        raise NotFound(f"no gotcha matches {query!r}; try an id (U7, AD4) or a word such as inode, xid, crlf")
    checked = gotchas.checked_by_code()
    entries = []
    for e in hits:
        d = e.as_dict()
        d["checked_by"] = sorted(set(e.checked_by) | checked.get(e.id, set()))
        entries.append(d)
    more = f" (showing {len(hits)}; --limit for more)" if total > len(hits) else ""
    return envelope("gotcha", ok=True, summary=f"{total} gotcha(s) match {query!r}{more}",
                    data={"query": query, "total": total, "hits": entries},
                    next=[f"gpuops gotcha --query {h.id}" for h in hits[1:3]])


# ---- human output -------------------------------------------------------------------------------

def render_list(doc, con):
    rows = doc["data"]["profiles"]
    width = max(len(r["name"]) for r in rows) + 1
    for r in rows:
        origin = " (user)" if r["origin"] == "user" else ""
        con.print(f"{r['name']:<{width}} {r['kind']:<11} detach {r['detach']:<8} durable {r['durable_dir'] or 'off-box'}"
                  f"; meter stop deletes {', '.join(r['meter_stop_deletes']) or 'nothing'}{origin}",
                  markup=False, soft_wrap=True)
    con.print(doc["summary"], markup=False, soft_wrap=True)


def _line(con, label, text):
    if text:
        con.print(f"[bold]{label:<12}[/]", end=" ")
        con.print(str(text), markup=False, soft_wrap=True)


def _days(seconds: int) -> str:
    return f"{seconds / 86400:g} d" if seconds >= 86400 else f"{seconds / 3600:g} h"


def render_profile(doc, con):
    d = doc["data"]
    con.print(f"[bold]{d['title']}[/] ({d['name']}, {d['kind']}, {d['origin']} profile {d['source']})")
    con.print(d["summary"], markup=False, soft_wrap=True)
    ssh = d["ssh"]
    _line(con, "ssh", f"{ssh['user']}@{ssh['host_pattern'] or '<host>'}; port: {ssh['port']}"
          + ("" if ssh["file_transfer"] else "; no scp/rsync on this path"))
    paths = d["paths"]
    _line(con, "paths", " · ".join(f"{k.replace('_dir', '').replace('_', ' ')}: {v}"
                                   for k, v in paths.items() if v and k != "scratch"))
    launch = d["launch"]
    _line(con, "launch", f"{launch['detach']}" + (f" (fallback {launch['detach_fallback']})" if launch["detach_fallback"] else "")
          + (f" · proxy hook: {launch['proxy_hook']}" if launch["proxy_hook"] else "")
          + (f" · python: {launch['python']}" if launch["python"] else ""))
    billing = d["billing"]
    _line(con, "meter stop", f"{billing['meter_stop_verb']}: deletes "
          + (", ".join(d["deleted_by_meter_stop"]) or "nothing"))
    _line(con, "destroy", billing["destroy_verb"])
    _line(con, "still bills", billing["still_bills"])
    for t in d["storage"]:
        facts = ", ".join(x for x in (t["medium"], t["size"], f"{t['inode_cap']:,} inodes max" if t["inode_cap"] else "") if x)
        fate = (f"stop {'keeps' if t['survives_pause'] else 'DELETES'}, destroy {'keeps' if t['survives_destroy'] else 'DELETES'}"
                + (", bills while stopped" if t["bills_when_stopped"] else ""))
        _line(con, "storage", f"{t['name']} {t['path']}" + (f" ({facts})" if facts else "") + f": {fate}")
    for c in d["clocks"]:
        _line(con, "danger", f"{c['name']}: {_days(c['after_s'])} after {c['trigger']} → {c['effect']}"
              + (f" ({c['gotcha']})" if c["gotcha"] else ""))
    intr = d["interruption"]
    _line(con, "spot", ("yes" + (f", grace {intr['grace_s']:g} s" if intr["grace_s"] is not None else "")
                        + (f"; {intr['signal']}" if intr["signal"] else "")) if intr["spot"] else "no")
    net = d["network"]
    _line(con, "network", f"egress {net['egress']}" + ("; behind the GFW: mirrors/proxy needed" if net["behind_gfw"] else "")
          + (f"; {net['ports']}" if net["ports"] else ""))
    _line(con, "cuda", f"{d['cuda']['driver']}" + (f"; {d['cuda']['notes']}" if d["cuda"]["notes"] else ""))
    if d["preflight"]:
        _line(con, "preflight", ", ".join(f"{k}={v}" for k, v in d["preflight"].items()))
    for gid in d["gotchas"]:
        _line(con, "gotcha", f"{gid}: {d['gotcha_titles'][gid]}")
    for step in doc.get("next") or []:
        con.print(f"  next: {step}", markup=False, soft_wrap=True)


def render_profiles(doc, con):
    if "profiles" in doc["data"]:
        render_list(doc, con)
    elif "candidates" in doc["data"]:
        for c in doc["data"]["candidates"]:
            con.print(f"{c['name']:<12} score {c['score']}: {'; '.join(c['evidence'])}", markup=False)
        con.print(doc["summary"], markup=False, soft_wrap=True)
    else:
        render_profile(doc, con)


def render_gotchas(doc, con):
    hits = doc["data"]["hits"]
    first = hits[0]
    con.print(f"[bold]{first['id']}: {first['title']}[/]")
    for label, key in (("symptom", "symptom"), ("cause", "cause"), ("fix", "fix")):
        _line(con, label, first[key])
    handled = [f"checked by {', '.join(first['checked_by'])}"] if first["checked_by"] else []
    handled += [f"prevented by gpuops {p['verb']}: {p['how']}" for p in first["prevented_by"]]
    _line(con, "gpuops", "; ".join(handled) or "reference only")
    _line(con, "see also", ", ".join(first["see"]))
    for h in hits[1:]:
        con.print(f"  {h['id']:<10} {h['title']}", markup=False, soft_wrap=True)
    con.print(doc["summary"], markup=False, soft_wrap=True)
