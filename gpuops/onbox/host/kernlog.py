"""Kernel-log evidence since boot: NVIDIA Xid lines, "fallen off the bus", OOM-killer victims.

Sources, first readable wins: `dmesg`, then `journalctl -k -b`, then /var/log/kern.log (the file
may span several boots, so only the part after the last boot banner, or lines stamped after
btime, counts). Rented containers often cannot read any of them (dmesg_restrict, no journal):
the result then says `readable: false` and why, which is not the same as "no errors".

Test seam: with GPUOPS_ROOT=R set, no command is run and the log is R/var/log/kern.log or nothing.
"""

import re
import time

from . import procs, runcmd, sysroot

# "NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus." (older drivers omit PCI:)
XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.[0-9a-fA-F])?\): (\d+)")
# The bus-loss report that can come without any Xid line.
FELL_OFF = re.compile(r"NVRM: (?:The NVIDIA )?GPU (?:at )?(?:PCI:)?([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})"
                      r"(?:\.[0-9a-fA-F])?\b.*fallen off the bus")
OOM = re.compile(r"(Memory cgroup out of memory|Out of memory)?:? ?Killed process (\d+) \(([^)]*)\)")
# mm/oom_kill.c's one-line summary, printed just before the victim line; the memcg paths are the
# host's (init cgroup namespace), which is what tells a neighbour's OOM from ours.
OOM_SUMMARY = re.compile(r"oom-kill:constraint=(\w+),.*?(?:,oom_memcg=([^,]*))?(?:,task_memcg=([^,]*))?"
                         r",task=(.*),pid=(\d+),uid=(\d+)\s*$")
UPTIME_STAMP = re.compile(r"\[\s*(\d+\.\d+)\]")
BOOT_BANNER = re.compile(r"\[\s*0\.000000\]\s+Linux version")
ISO_STAMP = re.compile(r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})")
SYSLOG_STAMP = re.compile(r"^([A-Z][a-z]{2})\s+(\d{1,2}) (\d{2}:\d{2}:\d{2})")

KEEP_LINES = 20
LINE_CHARS = 300
CMD_TIMEOUT_S = 5
BOOT_SLACK_S = 300  # clock steps right after boot: a line stamped a little before btime still counts


def stamp(line, now):
    """Epoch seconds of a syslog line's leading timestamp, or None when it has none we know."""
    m = ISO_STAMP.match(line)
    if m:
        try:
            return time.mktime(time.strptime(m.group(1) + " " + m.group(2), "%Y-%m-%d %H:%M:%S"))
        except ValueError:
            return None
    m = SYSLOG_STAMP.match(line)
    if not m:
        return None
    year = time.localtime(now).tm_year
    for y in (year, year - 1):  # the classic format has no year: take the latest one not in the future
        try:
            t = time.mktime(time.strptime("%d %s %s %s" % (y, m.group(1), m.group(2), m.group(3)), "%Y %b %d %H:%M:%S"))
        except ValueError:
            return None
        if t <= now + 86400:
            return t
    return None


def since_boot(lines, btime, now=None):
    """The lines of a multi-boot log file that belong to the current boot."""
    last_banner = None
    for i, line in enumerate(lines):
        if BOOT_BANNER.search(line):
            last_banner = i
    if last_banner is not None:
        return lines[last_banner:]
    if not btime:
        return lines
    now = time.time() if now is None else now
    kept = []
    for line in lines:
        t = stamp(line, now)
        if t is None or t >= btime - BOOT_SLACK_S:
            kept.append(line)
    return kept


def when(line, btime, now):
    """Epoch seconds a kernel line was printed: its syslog stamp, else btime + its [uptime] stamp."""
    t = stamp(line, now)
    if t is not None:
        return t
    m = UPTIME_STAMP.search(line)
    return btime + float(m.group(1)) if m and btime else None


def _summary(line):
    m = OOM_SUMMARY.search(line)
    if not m:
        return None
    return int(m.group(5)), {"constraint": m.group(1), "oom_memcg": m.group(2), "task_memcg": m.group(3)}


def scan(lines, btime=None, now=None) -> dict:
    """Xid, bus-loss and OOM evidence from kernel log lines (bounded)."""
    xids, fell, ooms, summaries = {}, {}, [], {}
    now = time.time() if now is None else now
    for line in lines:
        if "oom-kill:" in line:
            found = _summary(line)
            if found:
                summaries[found[0]] = found[1]
            continue
        if "NVRM" in line:
            m = XID.search(line)
            if m:
                key = (int(m.group(2)), m.group(1).lower())
                entry = xids.setdefault(key, {"code": key[0], "pci": key[1], "count": 0})
                entry["count"] += 1
                entry["last_line"] = line.strip()[:LINE_CHARS]
                continue
            m = FELL_OFF.search(line)
            if m:
                entry = fell.setdefault(m.group(1).lower(), {"pci": m.group(1).lower(), "count": 0})
                entry["count"] += 1
                entry["last_line"] = line.strip()[:LINE_CHARS]
                continue
        if "Killed process" in line:
            m = OOM.search(line)
            if m:
                kind = "cgroup" if m.group(1) and m.group(1).startswith("Memory cgroup") else "global"
                victim = {"pid": int(m.group(2)), "comm": m.group(3), "kind": kind,
                          "line": line.strip()[:LINE_CHARS], "at": when(line, btime, now)}
                victim.update(summaries.pop(victim["pid"], {}))
                ooms.append(victim)
    return {
        "xid": sorted(xids.values(), key=lambda e: (e["code"], e["pci"])),
        "fallen_off_bus": sorted(fell.values(), key=lambda e: e["pci"]),
        "oom_kill_count": len(ooms),
        "oom_kills": ooms[-KEEP_LINES:],
        "lines_scanned": len(lines),
    }


def _file_lines(path, label: str, tried):
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except (OSError, IOError) as e:
        tried.append({"source": label, "why": getattr(e, "strerror", None) or str(e)})
        return None
    return {"readable": True, "source": label, "tried": tried,
            "lines": since_boot(text.splitlines(), procs.boot_time())}


def source_lines():
    """This boot's kernel-log lines from the first readable source: {readable, source, tried, lines}."""
    tried = []
    if sysroot.overlay_active():
        doc = _file_lines(sysroot.root().rstrip("/") + "/var/log/kern.log", "kern.log (GPUOPS_ROOT)", tried)
        return doc or {"readable": False, "source": None, "tried": tried}
    for argv in (["dmesg"], ["journalctl", "-k", "-b", "--no-pager", "-q"]):
        r = runcmd.run(argv, CMD_TIMEOUT_S)
        if r["error"] is None and r["rc"] == 0 and r["out"].strip():
            return {"readable": True, "source": argv[0], "tried": tried, "lines": r["out"].splitlines()}
        why = r["error"] or (r["err"].strip().splitlines() or ["exit %s, no kernel messages visible" % r["rc"]])[-1]
        tried.append({"source": argv[0], "why": why[:200]})
    doc = _file_lines(sysroot.path("/var/log/kern.log"), "/var/log/kern.log", tried)
    return doc or {"readable": False, "source": None, "tried": tried}


def read():
    """The kernel-log document: {readable, source, tried, xid, fallen_off_bus, oom_kills, ...}."""
    src = source_lines()
    if not src["readable"]:
        return src
    doc = scan(src.pop("lines"), procs.boot_time())
    doc.update(src)
    return doc
