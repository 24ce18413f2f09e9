"""A keeper on an always-on host (`launch --fleet F --vault HOST:DIR --keeper-host KH`): this
machine's side; the keeper host's is gpuops.keeper.handover.

Before anything is launched, KH is asked in one SSH round trip which python there imports gpuops
(python3 on its PATH, or the interpreter of its `gpuops` script) and at which version: none is
NotFound (exit 4), another version Refused (exit 5). Then KH itself tries every box of the fleet
and the vault host over SSH, as its keeper will: one it cannot reach is Refused, naming each.
After the first attempt is launched here, the hand-over sends the run's record and its fleet
(the boxes it may use, their prices and stop commands) on stdin, never argv, to KH's state dir, and
KH starts the keeper detached there. Nothing is copied but those: no key leaves this machine, and
how KH reaches the boxes (its own keys, its own ssh config) is its own business.

Here the record keeps `keeper_host` {host, python}: `status`, `wait`, `logs`, `diagnose` and
`stop` of the run ask KH (follow, ask_stop), and the copy here is refreshed with each answer. A KH
out of reach is said (keeper_seen.alive None), never taken for the run's end: the run goes on on
its box, and KH's keeper goes on looking after it.
"""

import json
import re

from .. import __version__, errors, fleetfile
from ..remote.targets import target_for
from ..remote.wrap import quote
from . import attempt, record, vault

CALL_S = 60.0
ANSWER_BYTES = 16 << 20
WHY_CHARS = 300
PYTHON_WORD = re.compile(r"[A-Za-z0-9_./+=-]{1,200}")

# Each candidate python there and the gpuops it imports, "PYTHON<TAB>VERSION" a line: python3 on the
# login's PATH, then the #! interpreter of its `gpuops` script (on the PATH, else ~/.local/bin).
FIND = ("g=$(command -v gpuops || echo \"$HOME/.local/bin/gpuops\")\n"
        "for py in python3 \"$(sed -n '1s/^#! *//p' \"$g\" 2>/dev/null)\"; do\n"
        "  [ -n \"$py\" ] || continue\n"
        "  v=$($py -c 'import gpuops; print(gpuops.__version__)' 2>/dev/null) && printf '%s\\t%s\\n' \"$py\" \"$v\"\n"
        "done\nexit 0")


def _line(text) -> str:
    """The first line of text a host sent, bounded, with no control characters."""
    lines = str(text or "").splitlines()
    return "".join(c if c.isprintable() else " " for c in (lines[0] if lines else ""))[:WHY_CHARS]


class KeeperHost(object):
    def __init__(self, host: str, python: str) -> None:
        words = python.split()
        if not words or not all(PYTHON_WORD.fullmatch(w) for w in words):
            raise errors.Refused(f"keeper host {host}: {_line(python)!r} is not a python command gpuops runs")
        self.host, self.python = host, " ".join(words)

    @property
    def where(self) -> dict:
        return {"host": self.host, "python": self.python}

    @classmethod
    def find(cls, host: str) -> "KeeperHost":
        """KH's python that imports this gpuops version; NotFound or Refused (one line) else."""
        out = _run(host, FIND, b"", 4096)
        found = [ln.split("\t", 1) for ln in out.text.splitlines() if "\t" in ln]
        same = [py for py, v in found if v.strip() == __version__]
        if same:
            return cls(host, same[0])
        if found:
            raise errors.Refused(f"keeper host {host} has gpuops {_line(found[0][1])}, this machine {__version__}: "
                                 "install the same version there; nothing was launched")
        raise errors.NotFound(f"keeper host {host}: no gpuops there (python3 -m gpuops, or a gpuops on its PATH): "
                              f"install gpuops {__version__} there; nothing was launched")

    @classmethod
    def ready(cls, host: str, spec: dict) -> "KeeperHost":
        """KH, checked: it runs this gpuops and reaches the vault host and every box of the fleet."""
        if not spec.get("vault_host"):
            raise errors.UsageError("--keeper-host: give --vault HOST:DIR (a vault on this machine is out of the "
                                    "keeper host's reach)")
        kh = cls.find(host)
        boxes = [b.alias for b in attempt.candidates(spec, set())]
        far = kh.call("check", None, {"boxes": boxes, "vault_host": spec["vault_host"]}).get("unreachable")
        if not isinstance(far, dict):
            raise errors.Refused(f"keeper host {host} did not say which boxes it reaches")
        if far:
            raise errors.Refused(f"keeper host {host} cannot reach {', '.join(map(_line, far))} over SSH ("
                                 + "; ".join(f"{_line(n)}: {_line(w)}" for n, w in far.items())
                                 + "); nothing was launched")
        return kh

    def call(self, verb: str, run_id, doc=None) -> dict:
        """gpuops.keeper.handover's `verb` on KH, `doc` on its stdin: its JSON answer."""
        line = f"{' '.join(map(quote, self.python.split()))} -m gpuops.keeper.handover {quote(verb)}"
        if run_id is not None:
            line += f" {quote(run_id)}"
        result = _run(self.host, line, json.dumps(doc or {}).encode("utf-8"), ANSWER_BYTES)
        if result.exit != 0:
            why = f"keeper host {self.host}: {_line(result.err_text.strip()) or f'exit {result.exit}'}"
            raise (errors.UsageError if result.exit == errors.USAGE else errors.Refused)(why)
        try:
            answer = json.loads(result.stdout.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            answer = None
        if not isinstance(answer, dict):
            raise errors.Refused(f"keeper host {self.host}: answered no JSON object to {verb}")
        return answer

    def take(self, rec: dict) -> dict:
        """The run's record and fleet handed to KH, whose keeper starts there: {pid, log} (KH's)."""
        doc = {"record": rec, "fleet": fleet_text(rec["spec"]), "stop": (record.stop_asked(rec["run_id"]) or {}).get("why")}
        answer = self.call("take", rec["run_id"], doc)
        if type(answer.get("pid")) is not int:
            raise errors.Refused(f"keeper host {self.host}: named no keeper pid")
        if record.stop_asked(rec["run_id"]) and not doc["stop"]:  # a stop asked here during the hand-over
            self.call("stop", rec["run_id"])
        return {"pid": answer["pid"], "log": _line(answer.get("log"))}


def _run(host, line: str, stdin: bytes, max_bytes: int):
    target = target_for(host)
    try:
        return target.run(line, stdin=stdin, timeout_s=CALL_S, max_bytes=max_bytes)
    finally:
        target.close()


def fleet_text(spec: dict) -> str:
    """The fleet file of the boxes the run may use (theirs: alias, profile, price, labels, stop), as
    the keeper host reads it; each string in TOML's basic form (JSON's escapes are TOML's)."""
    out = []
    for b in fleetfile.boxes(spec["fleet"]):
        out.append(f"[[host]]\nalias = {json.dumps(b.alias)}\n")
        if b.profile:
            out.append(f"profile = {json.dumps(b.profile)}\n")
        if b.usd_per_hour is not None:
            out.append(f"usd_per_hour = {float(b.usd_per_hour)!r}\n")
        if b.labels:
            out.append("labels = { " + ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in b.labels.items())
                       + " }\n")
        if b.stop:
            out.append(f"stop = {json.dumps(b.stop)}\n")
        out.append("\n")
    return "".join(out)


def follow(rec: dict) -> dict:
    """The run's record as its keeper host has it (and kept here for when KH is out of reach), with
    keeper_seen {host, pid, alive}; alive None, and why, when KH did not answer."""
    where = rec["keeper_host"]
    seen = {"host": where["host"], "pid": None, "alive": None}
    try:
        doc = KeeperHost(where["host"], where["python"]).call("show", rec["run_id"])
    except errors.GpuopsError as e:
        return dict(rec, keeper_seen=dict(seen, why=f"out of reach: {_line(e.message)}"))
    got, keeper = doc.get("record"), doc.get("keeper")
    if not isinstance(got, dict) or not _valid(got, rec["run_id"]):
        return dict(rec, keeper_seen=dict(seen, why="it holds no record of the run (the hand-over did not reach it)"))
    got["keeper_host"] = where
    record.write(got)
    keeper = keeper if isinstance(keeper, dict) else {}
    pid = keeper.get("pid") if type(keeper.get("pid")) is int else None
    return dict(got, keeper_seen=dict(seen, pid=pid, alive=keeper.get("alive") is True))


def _valid(rec: dict, run_id: str) -> bool:
    """A record KH sent is the run's and has what the views read (each box a host word)."""
    try:
        return (rec.get("run_id") == run_id and isinstance(rec.get("spec"), dict)
                and isinstance(rec.get("phase"), str) and isinstance(rec.get("marks"), list)
                and isinstance(rec.get("events"), list) and bool(rec.get("attempts"))
                and all(re.fullmatch(fleetfile.ALIAS, n["box"]) and not n["box"].startswith("-")
                        and vault.plain(n["job"]) for a in rec["attempts"] for n in a.get("nodes") or [a]))
    except (TypeError, KeyError, AttributeError):
        return False


def ask_stop(rec: dict) -> str:
    """`gpuops stop` of a kept run: asked here (kept for a hand-over under way), and of its keeper
    host when it has one; where it was asked."""
    record.ask_stop(rec["run_id"], "gpuops stop")
    where = rec.get("keeper_host")
    if not where:
        return "this machine"
    KeeperHost(where["host"], where["python"]).call("stop", rec["run_id"])
    return f"keeper host {where['host']}"
