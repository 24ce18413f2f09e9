"""Box-level verdicts: a recent reboot, a way to detach a run, a free rendezvous port, and a
probe that could see everything."""

from ..findings import Finding

DETACH = ("tmux", "screen", "setsid", "nohup")


def recent_boot(facts, t):
    up = (facts.get("boot") or {}).get("uptime_s")
    if up is None:
        return []
    evidence = {"uptime_s": round(up), "boot_id": (facts.get("boot") or {}).get("boot_id")}
    if up < t["recent_boot_s"]:
        return [Finding("boot.recent", "info", f"the box booted {up / 60:.0f} min ago: a run started before then is gone",
                        evidence, "uptime -s   # a run started before this time died with the reboot: restart it "
                        "from its last checkpoint", "U3")]
    return [Finding("boot.recent", "ok", f"up {up / 3600:.1f} h", evidence)]


def detach(facts, t):
    tools = facts.get("tools") or {}
    have = [name for name in DETACH if tools.get(name)]
    if not have:
        return [Finding("detach.missing", "warn",
                        "no tmux, screen, setsid or nohup: a run started over SSH dies when the connection drops",
                        {"checked": ",".join(DETACH)}, "apt-get install -y tmux   # or any of util-linux/coreutils", "GEN2")]
    return [Finding("detach.missing", "ok", f"can detach runs with {', '.join(have)}", {"available": ",".join(have)})]


def rendezvous_ports(facts, t):
    watched = set(t["rendezvous_ports"])
    busy = [l for l in facts.get("listeners") or [] if l.get("port") in watched]
    out = []
    for l in busy:
        owners = l.get("owners") or []
        who = ", ".join(f"{o['pid']}({o.get('comm')})" for o in owners) or "owner not visible"
        free = next((p for p in range(l["port"] + 1, l["port"] + 50) if p not in
                     {x.get("port") for x in facts.get("listeners") or []}), l["port"] + 1)
        fix = f"torchrun --master-port={free} ...   # or stop the leftover: " + (
            f"kill {' '.join(str(o['pid']) for o in owners)}" if owners else "ss -ltnp | grep :" + str(l["port"]))
        out.append(Finding("net.rendezvous-port", "warn",
                           f"port {l['port']} is already listening: torchrun will fail with 'Address already in use'",
                           {"port": l["port"], "address": l.get("address"), "held_by": who}, fix))
    if facts.get("listeners") is not None and not out:
        out.append(Finding("net.rendezvous-port", "ok", "rendezvous ports free",
                           {"ports": ",".join(str(p) for p in sorted(watched))}))
    return out


def probe_errors(facts, t):
    errors = facts.get("errors") or {}
    if not errors:
        return []
    return [Finding("probe.partial", "warn", f"the probe could not gather: {', '.join(sorted(errors))}",
                    {k: v[:150] for k, v in errors.items()}, "gpuops preflight --json   # re-run; report the errors if they repeat")]


CHECKS = (recent_boot, detach, rendezvous_ports, probe_errors)
