"""profiles and gotcha for people: a profile list, one profile in full, a platform guess, gotchas."""

from ..units import duration


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
        _line(con, "danger", f"{c['name']}: {duration(c['after_s'])} after {c['trigger']} → {c['effect']}"
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
