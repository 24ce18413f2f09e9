"""Platform profiles: what a rental platform does to your paths, jobs and money, as checked data.

A profile is a TOML file named `<name>.toml`. Shipped ones live in the repository's `profiles/`;
a user's own live in `$GPUOPS_PROFILES_DIR`, else `$XDG_CONFIG_HOME/gpuops/profiles`, else
`~/.config/gpuops/profiles`, and win over a shipped profile of the same name. The dataclasses
below ARE the schema (see gpuops.tomlschema): an unknown key, a wrong type, a missing required
key, a negative count or price, nan or inf is a one-line usage error naming the file, the line and
the key.

Verbs use `load(name)`: preflight reads `paths` and `preflight` (threshold overrides, checked
against gpuops.checks.thresholds.DEFAULTS when that module exists) and each tier's `inode_cap`;
launch reads `launch` and `paths.job_root`/`paths.hf_home`; sync asks `destination_survives`.
"""

import dataclasses
import os
import posixpath
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Optional

from . import sitedefaults, tomlschema
from .tomlschema import field as _f
from .errors import NotFound, UsageError

NAME = re.compile(r"[a-z0-9][a-z0-9-]*")
SHIPPED_DIR = Path(__file__).resolve().parent / "data" / "profiles"  # a link to the repo's profiles/, copied into wheels
GOTCHA_ID = r"[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)?"

KINDS = ("ssh-rental", "cloud-api", "ssh", "slurm", "kubernetes", "workstation")
# How a platform keeps a job alive: a process detached on the box, or a scheduler's job, which
# gpuops launches only through an engine that runs it (gpuops.engines.runs_detach).
PROCESS_DETACH = ("tmux", "nohup", "setsid", "onstart")
SCHEDULER_DETACH = ("sbatch", "k8s-job")
DETACH = PROCESS_DETACH + SCHEDULER_DETACH
METER_STOP = ("pause", "destroy", "none")
EGRESS = ("free", "metered", "host-priced", "unknown")
VERBS = ("stop", "pause", "destroy")


@dataclasses.dataclass(frozen=True)
class Access:
    user: str = _f("login user on the box (root, ubuntu, $USER …)")
    host_pattern: str = _f("shape of the SSH address, with <placeholders>", "")
    port: str = _f("port convention, in words", "22")
    home: str = _f("home directory of the login user; `~` and $HOME in paths expand to it", "")
    file_transfer: bool = _f("scp/rsync/sftp work over the usual SSH path", True)
    notes: str = _f("anything else about reaching the box", "")


@dataclasses.dataclass(frozen=True)
class Paths:
    data_dir: str = _f("fast working disk for data and live checkpoints", "")
    durable_dir: str = _f("on-box directory that survives destroying the instance; empty = nothing does, pull off-box", "")
    checkpoint_dir: str = _f("where checkpoints should be written", "")
    job_root: str = _f("where `gpuops launch` keeps job directories (empty = its default)", "")
    scratch: tuple[str, ...] = _f("globs that are safe to prune when space runs short", ())
    hf_home: str = _f("HF_HOME for jobs (keep big caches off small disks)", "")
    tensorboard_logdir: str = _f("logdir the platform's own TensorBoard is pinned to, if any", "")


@dataclasses.dataclass(frozen=True)
class Launch:
    detach: str = _f("what keeps a job alive after the SSH session ends", choices=DETACH)
    detach_fallback: str = _f("used when the primary is missing on the box", "", choices=("",) + DETACH)
    proxy_hook: str = _f("shell line run before network access (sourced, must not fail the job)", "")
    python: str = _f("interpreter to run jobs with (empty = python3 on PATH)", "")
    env: Mapping[str, str] = _f("environment every job gets (never secrets)", {})
    notes: str = _f("how detaching behaves across drops, restarts and stops", "")


@dataclasses.dataclass(frozen=True)
class Billing:
    meter_stop_verb: str = _f("the action that stops the GPU meter, in the platform's words")
    meter_stop_is: str = _f("which survival column that action uses", choices=METER_STOP)
    destroy_verb: str = _f("the irreversible action that deletes the instance's disks", "")
    still_bills: str = _f("what keeps costing money after the meter-stop verb", "")
    granularity: str = _f("billing granularity and traps", "")
    loss_gotcha: str = _f("gotcha id explaining what teardown deletes", "", pattern=GOTCHA_ID)
    bills_gotcha: str = _f("gotcha id explaining what keeps billing", "", pattern=GOTCHA_ID)
    notes: str = _f("teardown order and caveats", "")


@dataclasses.dataclass(frozen=True)
class Tier:
    name: str = _f("short name of the storage tier")
    path: str = _f("mount point or pattern; <x>, * and $VAR match one segment, ~ and $HOME the login home")
    survives_pause: bool = _f("data kept across the platform's non-destructive stop/power-off")
    survives_destroy: bool = _f("data kept after the instance is destroyed/terminated/released")
    medium: str = _f("what it is (local NVMe, overlay, NFS, block volume …)", "")
    size: str = _f("typical or default size", "")
    inode_cap: int = _f("hard inode limit of the tier; 0 = none known", 0, min=0)
    bills_when_stopped: bool = _f("storage keeps billing while the instance is stopped or gone", False)
    shared: bool = _f("visible from other instances", False)
    note: str = _f("locks, speeds and traps", "")


@dataclasses.dataclass(frozen=True)
class Clock:
    name: str = _f("what the clock is called")
    trigger: str = _f("what starts it")
    after_s: int = _f("seconds until it fires", min=0)
    effect: str = _f("what happens when it fires")
    gotcha: str = _f("gotcha id with details", "", pattern=GOTCHA_ID)


@dataclasses.dataclass(frozen=True)
class Interruption:
    spot: bool = _f("a preemptible tier exists")
    grace_s: Optional[float] = _f("seconds between the stop signal and SIGKILL, when known", None, min=0)
    signal: str = _f("how an interruption shows up on the box", "")
    notes: str = _f("resume advice", "")


@dataclasses.dataclass(frozen=True)
class Network:
    egress: str = _f("how outbound traffic is priced", choices=EGRESS)
    egress_per_gb_usd: Optional[float] = _f("price per GB out, when metered", None, min=0)
    behind_gfw: bool = _f("pulls from HF/PyPI/GitHub need mirrors or a proxy", False)
    ports: str = _f("how service ports (TensorBoard, Jupyter) are exposed", "")
    notes: str = _f("proxies, mirrors, SSH flavour", "")


@dataclasses.dataclass(frozen=True)
class Cuda:
    driver: str = _f("who decides the host driver's max CUDA (image, host, stack)")
    notes: str = _f("how to avoid toolkit/driver/torch mismatches here", "")


@dataclasses.dataclass(frozen=True)
class Guess:
    hostname: tuple[str, ...] = _f("regexes matched against the box's hostname", ())
    mounts: tuple[str, ...] = _f("mount points whose presence points at this platform", ())
    env: tuple[str, ...] = _f("environment variable names whose presence points here", ())
    files: tuple[str, ...] = _f("files whose existence points here", ())


@dataclasses.dataclass(frozen=True)
class Profile:
    name: str = _f("file stem", file=False)
    source: str = _f("path of the file it was loaded from", file=False)
    origin: str = _f("shipped or user", file=False)
    schema: int = _f("profile format version (1)", choices=(1,))
    title: str = _f("human name of the platform")
    kind: str = _f("control model", choices=KINDS)
    summary: str = _f("two sentences: what is special about this platform")
    ssh: Access = _f("how to reach the box")
    paths: Paths = _f("where things go on the box")
    launch: Launch = _f("how jobs are started and detached")
    billing: Billing = _f("what stops the meter and what that destroys")
    storage: tuple[Tier, ...] = _f("storage tiers with their survival matrix (one [[storage]] each)")
    interruption: Interruption = _f("spot/preemption model")
    network: Network = _f("egress, proxies, ports")
    cuda: Cuda = _f("driver / CUDA notes")
    clocks: tuple[Clock, ...] = _f("danger clocks: timers that delete data or keep billing", ())
    preflight: Mapping[str, object] = _f("preflight threshold overrides (names from gpuops.checks.thresholds)", {})
    gotchas: tuple[str, ...] = _f("the platform's own gotcha ids (see `gpuops gotcha`)", (), pattern=GOTCHA_ID)
    guess: Guess = _f("signals for guessing this platform from a box", Guess)
    # [NAME]: each engine's own table, under its registry name (gpuops.sitedefaults): {name: table}
    engines: Mapping[str, object] = _f("each engine's own table", {}, file=False, tables=sitedefaults.tables)

    def tier_for(self, remote_path: str) -> Optional[Tier]:
        """The most specific storage tier whose path covers `remote_path`, or None."""
        path = self.absolute(remote_path)
        if path is None:  # relative to a home we do not know: only a whole-disk tier surely covers it
            return next((t for t in self.storage if t.path == "/"), None)
        best, best_len = None, -1
        for tier in self.storage:
            pattern = self._pattern(tier.path)
            if pattern and pattern.match(path) and len(tier.path) > best_len:
                best, best_len = tier, len(tier.path)
        return best

    def inode_cap_for(self, remote_path: str) -> int:
        tier = self.tier_for(remote_path)
        return tier.inode_cap if tier else 0

    def preflight_paths(self) -> list:
        """Concrete directories preflight should measure: [{role, path, inode_cap}], no duplicates."""
        out, seen = [], set()
        for role in ("data_dir", "durable_dir", "checkpoint_dir"):
            path = getattr(self.paths, role)
            concrete = self.absolute(path) if path else None
            if concrete and not re.search(r"[$<*]", concrete) and concrete not in seen:
                seen.add(concrete)
                out.append({"role": role, "path": concrete, "inode_cap": self.inode_cap_for(concrete)})
        return out

    def absolute(self, path: str) -> Optional[str]:
        home = self.ssh.home
        if path == "~" or path.startswith("~/"):
            full = (home + path[1:]) if home else None
        elif path == "$HOME" or path.startswith("$HOME/"):
            full = (home + path[5:]) if home else None
        elif path and not path.startswith(("/", "$")):
            full = posixpath.join(home, path) if home else None
        else:
            full = path
        return posixpath.normpath(full) if full else None

    def _pattern(self, tier_path: str):
        path = self.absolute(tier_path)
        if path is None:
            return None
        # A leading $VAR (e.g. $TMPDIR) is only known on the box: it then matches itself literally.
        parts = re.split(r"(<[^>/]*>|\*|(?<=/)\$[A-Za-z_]\w*)", path.rstrip("/") or "/")
        body = "".join("[^/]+" if p == "*" or p[:1] in "<$" and len(p) > 1 else re.escape(p) for p in parts)
        if body in ("/", re.escape("/")):
            return re.compile(r"/.*")
        return re.compile(body + r"(?:/.*)?")


def user_dir() -> Path:
    if os.environ.get("GPUOPS_PROFILES_DIR"):
        return Path(os.environ["GPUOPS_PROFILES_DIR"])
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return Path(base) / "gpuops" / "profiles"


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _candidates() -> dict:
    """name -> (path, origin); a user profile hides a shipped one of the same name."""
    found = {}
    for origin, directory in (("shipped", SHIPPED_DIR), ("user", user_dir())):
        if directory.is_dir():
            for path in sorted(directory.glob("*.toml")):
                if NAME.fullmatch(path.stem):
                    found[path.stem] = (path, origin)
    return found


def names() -> list:
    return sorted(_candidates())


def load(name: str) -> Profile:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise UsageError(f"bad profile name {name!r}: use lowercase letters, digits and dashes")
    found = _candidates()
    if name not in found:
        raise NotFound(f"no profile named {name!r}; known: {', '.join(sorted(found)) or 'none'}")
    path, origin = found[name]
    return load_file(path, origin=origin)


def load_file(path, origin: str = "user") -> Profile:
    path = Path(path)
    shown = _display(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{shown}: cannot read profile: {e}") from None
    data, src = tomlschema.parse(shown, text)
    profile = tomlschema.build(Profile, data, src, name=path.stem, source=str(path), origin=origin)
    _check_references(profile, src)
    return profile


def all_profiles() -> list:
    return [load_file(path, origin) for _, (path, origin) in sorted(_candidates().items())]


def _check_references(profile: Profile, src) -> None:
    """Cross-field rules the types cannot express: known gotcha ids and threshold names."""
    from .gotcha import known_ids

    known = known_ids()
    refs = [(("gotchas", i), g) for i, g in enumerate(profile.gotchas)]
    refs.append((("billing", "loss_gotcha"), profile.billing.loss_gotcha))
    refs += [(("clocks", i, "gotcha"), c.gotcha) for i, c in enumerate(profile.clocks)]
    for path, gid in refs:
        if gid and gid not in known:
            raise src.error(path, f"gotcha id {gid!r} is not in references/gotchas.toml")
    if not profile.storage:
        raise src.error(("storage",), "at least one [[storage]] tier is required")
    from .checks import thresholds

    for key, value in profile.preflight.items():
        try:
            thresholds.merged({key: value})
        except UsageError as e:  # re-raised with the file and line the value came from
            raise src.error(("preflight", key), e.message) from None


def thresholds(profile: Profile) -> dict:
    """The preflight thresholds with this profile's overrides applied."""
    from .checks import thresholds as th

    return th.merged(dict(profile.preflight))


def destination_survives(profile: Profile, remote_path: str, verb: str = "stop"):
    """(survives, reason) for data at `remote_path` when `verb` is done to the box.

    verb "stop" means the platform's meter-stop verb (whatever stops paying: 关机 on AutoDL,
    terminate on RunPod), "pause" the non-destructive stop, "destroy" the irreversible teardown.
    A path no tier covers is reported as not surviving: unknown means unsafe.
    """
    if verb not in VERBS:
        raise UsageError(f"verb must be one of {', '.join(VERBS)}, not {verb!r}")
    action = profile.billing.meter_stop_is if verb == "stop" else verb
    tier = profile.tier_for(remote_path)
    if tier is None:
        return False, f"no storage tier of profile {profile.name!r} covers {remote_path}; treat it as lost"
    where = f"{remote_path} is on the {tier.name} ({tier.path})"
    if action == "none":
        return True, f"{where}; nothing on {profile.title} deletes it"
    kept = tier.survives_pause if action == "pause" else tier.survives_destroy
    return kept, f"{where}: {'kept' if kept else 'deleted'} by {verb_label(profile, verb)}"


def verb_label(profile: Profile, verb: str) -> str:
    """How a verb is called on this platform, for messages."""
    if verb == "stop":
        return f"the meter-stop verb, {profile.billing.meter_stop_verb}"
    if verb == "destroy":
        return f"destroying the instance, {profile.billing.destroy_verb or profile.billing.meter_stop_verb}"
    return "a non-destructive stop"


def lost_tiers(profile: Profile, verb: str = "stop") -> list:
    """Tiers whose data `verb` deletes (same verb meanings as destination_survives)."""
    action = profile.billing.meter_stop_is if verb == "stop" else verb
    if action == "none":
        return []
    return [t for t in profile.storage if not (t.survives_pause if action == "pause" else t.survives_destroy)]


def schema_markdown() -> str:
    """The profile schema as a markdown table, generated from the dataclasses above."""
    rows = ["| key | type | required | meaning |", "|---|---|---|---|"]
    for key, type_name, required, doc in tomlschema.schema_rows(Profile):
        rows.append(f"| `{key}` | {type_name} | {'yes' if required else ''} | {doc} |")
    return "\n".join(rows) + "\n"
