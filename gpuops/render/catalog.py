"""profiles and gotcha for people: a profile list, one profile in full, a platform guess, gotchas."""

import sys

from ..units import duration
from . import bold, plain_width, print_next


def render_list(doc, con) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(expand=False, box=None, pad_edge=False, header_style="bold")
    for name in ("NAME", "KIND", "DETACH", "DURABLE", "STOP DELETES"):
        table.add_column(name, no_wrap=name != "STOP DELETES")
    for r in doc["data"]["profiles"]:
        deletes = ", ".join(r["meter_stop_deletes"])
        table.add_row(r["name"] + (" (user)" if r["origin"] == "user" else ""), r["kind"], r["detach"],
                      r["durable_dir"] or "off-box", Text(deletes, style="bold red") if deletes else "nothing")
    con.print(table)
    con.print(doc["summary"], markup=False, soft_wrap=True)


def _lines(con, rows) -> None:
    """label / text rows; the text wraps at words under itself (a hanging indent), never mid-word."""
    from rich.table import Table
    from rich.text import Text

    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True, style="bold", min_width=11)
    grid.add_column(overflow="fold")
    for label, text, style in rows:
        if text:
            grid.add_row(label, Text(str(text), style=style or ""))
    con.print(grid)


def _danger(d):
    """What costs data or money, stated first: what each verb deletes, and the clocks that delete."""
    rows = [("meter stop", f"{d['billing']['meter_stop_verb']}: deletes "
             + (", ".join(d["deleted_by_meter_stop"]) or "nothing"), "bold red" if d["deleted_by_meter_stop"] else None)]
    for t in d["storage"]:
        if not t["survives_destroy"] or not t["survives_pause"]:
            fate = "stop DELETES it" if not t["survives_pause"] else f"{d['billing']['destroy_verb'] or 'destroy'} DELETES it"
            rows.append(("deletes", f"{t['name']} {t['path']}: {fate}", "bold red"))
    for c in d["clocks"]:
        rows.append(("clock", f"{c['name']}: {duration(c['after_s'])} after {c['trigger']} → {c['effect']}"
                     + (f" ({c['gotcha']})" if c["gotcha"] else ""), "bold red"))
    return rows


def render_profile(doc, con) -> None:
    from rich.text import Text

    d = doc["data"]
    # where a shipped profile lives is gpuops's business (and --json's); a user's own is named
    where = f" {d['source']}" if d["origin"] == "user" else ""
    con.print(Text.assemble((d["title"], "bold"), f" ({d['name']}, {d['kind']}, {d['origin']} profile{where})"))
    _lines(con, [("", d["summary"], None)] + _danger(d))
    ssh, paths, launch, billing = d["ssh"], d["paths"], d["launch"], d["billing"]
    rows = [
        ("ssh", f"{ssh['user']}@{ssh['host_pattern'] or '<host>'}; port: {ssh['port']}"
         + ("" if ssh["file_transfer"] else "; no scp/rsync on this path"), None),
        ("paths", " · ".join(f"{k.replace('_dir', '').replace('_', ' ')}: {v}"
                             for k, v in paths.items() if v and k != "scratch"), None),
        ("launch", f"{launch['detach']}" + (f" (fallback {launch['detach_fallback']})" if launch["detach_fallback"] else "")
         + (f" · proxy hook: {launch['proxy_hook']}" if launch["proxy_hook"] else "")
         + (f" · python: {launch['python']}" if launch["python"] else ""), None),
        ("destroy", billing["destroy_verb"], None),
        ("still bills", billing["still_bills"], None),
    ]
    for t in d["storage"]:
        facts = ", ".join(x for x in (t["medium"], t["size"], f"{t['inode_cap']:,} inodes max" if t["inode_cap"] else "") if x)
        fate = (f"stop {'keeps' if t['survives_pause'] else 'DELETES'}, destroy {'keeps' if t['survives_destroy'] else 'DELETES'}"
                + (", bills while stopped" if t["bills_when_stopped"] else ""))
        rows.append(("storage", f"{t['name']} {t['path']}" + (f" ({facts})" if facts else "") + f": {fate}", None))
    intr, net = d["interruption"], d["network"]
    rows += [
        ("spot", ("yes" + (f", grace {intr['grace_s']:g} s" if intr["grace_s"] is not None else "")
                  + (f"; {intr['signal']}" if intr["signal"] else "")) if intr["spot"] else "no", None),
        ("network", f"egress {net['egress']}" + ("; behind the GFW: mirrors/proxy needed" if net["behind_gfw"] else "")
         + (f"; {net['ports']}" if net["ports"] else ""), None),
        ("cuda", f"{d['cuda']['driver']}" + (f"; {d['cuda']['notes']}" if d["cuda"]["notes"] else ""), None),
    ]
    if d["preflight"]:
        rows.append(("preflight", ", ".join(f"{k}={v}" for k, v in d["preflight"].items()), None))
    rows += [("gotcha", f"{gid}: {d['gotcha_titles'][gid]}", None) for gid in d["gotchas"]]
    _lines(con, rows)
    print_next(doc, con)


def render_profiles(doc, con) -> None:
    if "profiles" in doc["data"]:
        render_list(doc, con)
    elif "candidates" in doc["data"]:
        for c in doc["data"]["candidates"]:
            con.print(f"{c['name']:<12} score {c['score']}: {'; '.join(c['evidence'])}", markup=False)
        con.print(doc["summary"], markup=False, soft_wrap=True)
    else:
        render_profile(doc, con)


def render_gotchas(doc, con) -> None:
    """Plain text to stdout, not through `con`: the answer is prose, and rich costs more to import
    than `gpuops gotcha` has to do (the label column and hanging indent are rich's grid's)."""
    import textwrap

    hits = doc["data"]["hits"]
    first = hits[0]
    width = plain_width()
    out = [bold(f"{first['id']}: {first['title']}")]
    handled = [f"checked by {', '.join(first['checked_by'])}"] if first["checked_by"] else []
    handled += [f"prevented by gpuops {p['verb']}: {p['how']}" for p in first["prevented_by"]]
    handled += [f"{what} {', '.join(first[key])}" for key, what in (
        ("explained_by", "explained after the fact by"), ("reminded_by", "reminded of by")) if first.get(key)]
    rows = [(label, first[label]) for label in ("symptom", "cause", "fix")]
    rows += [("gpuops", "; ".join(handled) or "documented only"), ("see also", ", ".join(first["see"]))]
    for label, text in rows:
        if text:
            lines = textwrap.wrap(" ".join(str(text).split()), max(20, width - _LABEL), break_on_hyphens=False)
            out += [bold(f"{label:<{_LABEL}}") + line if i == 0 else " " * _LABEL + line for i, line in enumerate(lines)]
    out += [f"  {h['id']:<10} {h['title']}" for h in hits[1:]]
    out.append(doc["summary"])
    sys.stdout.write("\n".join(out) + "\n")


_LABEL = 12  # the label column: the longest label and a space

