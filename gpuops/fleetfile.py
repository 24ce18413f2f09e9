"""The fleet file: the boxes you rent, what each costs an hour, and named groups of them.

    # ~/.config/gpuops/fleet.toml ($XDG_CONFIG_HOME honoured)
    [[host]]
    alias = "vast-a100"          # an ssh_config alias or user@host:port, as --host takes it
    profile = "vastai"           # its platform profile (data dir measured; see `gpuops profiles`)
    usd_per_hour = 1.20          # what the box costs while it is rented, idle or not
    labels = { gpu = "a100" }
    stop = "vastai stop instance 123"   # how to stop it (launch --vault --stop-when-done)

    [fleet.train]                # `gpuops fleet --fleet train`
    hosts = ["vast-a100"]

Validated like a profile (gpuops.tomlschema): a wrong type, an unknown key, a negative or absurd
price, an unknown profile, a repeated alias or a group naming an alias the file does not define is
one usage error (exit 2) with the file and the line.
"""

import dataclasses
import os
import re
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Optional

from . import profiles, tomlschema
from .errors import NotFound, UsageError

# A price above this is a typo (cents written as dollars), not a GPU box: the most expensive
# 8-GPU rentals cost tens of dollars an hour.
MAX_USD_PER_HOUR = 1000.0
# An alias is one --host word: no comma (which separates hosts) and no whitespace.
ALIAS = r"[^\s,]{1,253}"
GROUP = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


@dataclasses.dataclass(frozen=True)
class Box:
    alias: str = dataclasses.field(metadata={"doc": "ssh_config alias or user@host:port", "pattern": ALIAS,
                                             "pattern_doc": "one host word (no comma, no space)"})
    profile: str = dataclasses.field(default="", metadata={"doc": "platform profile name (empty = none)"})
    usd_per_hour: Optional[float] = dataclasses.field(default=None, metadata={"doc": "hourly price in USD",
                                                                              "min": 0})
    labels: Mapping[str, str] = dataclasses.field(default_factory=lambda: MappingProxyType({}),
                                                  metadata={"doc": "free-form key = value tags"})
    stop: str = dataclasses.field(default="", metadata={"doc": "a command run on this machine that stops the box "
                                                       "(the provider's CLI), for launch --stop-when-done"})


@dataclasses.dataclass(frozen=True)
class Group:
    hosts: tuple[str, ...] = dataclasses.field(metadata={"doc": "aliases of [[host]] entries"})


@dataclasses.dataclass(frozen=True)
class FleetFile:
    host: tuple[Box, ...] = dataclasses.field(default=(), metadata={"doc": "every box, one [[host]] each"})
    fleet: Mapping[str, Group] = dataclasses.field(default_factory=lambda: MappingProxyType({}),
                                                   metadata={"doc": "named groups: [fleet.NAME] hosts = [...]"})


def default_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return Path(base) / "gpuops" / "fleet.toml"


def load(path) -> FleetFile:
    """The fleet file at `path`, checked; UsageError with file:line for the first mistake."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: cannot read the fleet file: {e}") from None
    data, src = tomlschema.parse(str(path), text)
    doc = tomlschema.build(FleetFile, data, src)
    _check(doc, src)
    return doc


def _check(doc: FleetFile, src) -> None:
    """The rules the types cannot say: sane prices, known profiles, unique aliases, real members."""
    known, seen = None, {}
    for i, box in enumerate(doc.host):
        price = box.usd_per_hour
        if price is not None and price > MAX_USD_PER_HOUR:
            raise src.error(("host", i, "usd_per_hour"), f"{price!r} USD an hour is more than {MAX_USD_PER_HOUR:g}; "
                                                         "a typo?")
        if box.profile:
            known = known if known is not None else profiles.names()
            if box.profile not in known:
                raise src.error(("host", i, "profile"), f"unknown profile {box.profile!r}; known: {', '.join(known)}")
        if box.alias in seen:
            raise src.error(("host", i, "alias"), f"alias {box.alias!r} is already the [[host]] on line "
                                                  f"{src.line_of(('host', seen[box.alias]))}")
        seen[box.alias] = i
    for name, group in doc.fleet.items():
        if not GROUP.fullmatch(name):
            raise src.error(("fleet", name), "a fleet name is letters, digits, '-' and '_'")
        for j, alias in enumerate(group.hosts):
            if alias not in seen:
                raise src.error(("fleet", name, "hosts", j), f"{alias!r} is not the alias of any [[host]] here")


def boxes(name: Optional[str]=None, path=None) -> list:
    """The boxes of fleet `name` (a [fleet.NAME] group of the default file, or a file of its own),
    or every [[host]] of the default file when no name is given."""
    if name and (os.sep in name or name.endswith(".toml")):
        if not Path(name).is_file():
            raise NotFound(f"no fleet file {name}")
        return list(load(name).host)
    path = Path(path) if path else default_path()
    if not path.is_file():
        if name:
            raise NotFound(f"no fleet {name!r}: {path} does not exist")
        raise UsageError(f"no hosts: give --host a,b or list your boxes in {path} (see README, 'Several boxes')")
    doc = load(path)
    if not name:
        return list(doc.host)
    if name not in doc.fleet:
        raise NotFound(f"no fleet {name!r} in {path}; known: {', '.join(sorted(doc.fleet)) or 'none'}")
    by_alias = {b.alias: b for b in doc.host}
    return [by_alias[a] for a in doc.fleet[name].hosts]


def aliases(name: Optional[str]=None, path=None) -> list:
    """The --host words of boxes(name, path), in their order."""
    return [box.alias for box in boxes(name, path)]


def for_hosts(aliases, path=None) -> list:
    """Boxes for --host words: the fleet file's entry for an alias it lists (its price and
    profile), else a bare box. The file is read only when it exists."""
    path = Path(path) if path else default_path()
    listed = {b.alias: b for b in load(path).host} if path.is_file() else {}
    return [listed.get(a) or Box(alias=a) for a in aliases]

