"""What every engine answers on this side (its box half: gpuops.onbox.engines.registry).

An engine subclasses Engine and overrides what it does differently; the defaults are an engine
that takes no flags of its own and has nothing to add. Pure: facts and flags in, rows and steps
out (what a person reads of them: gpuops.render.engines); the verbs (gpuops.ops) do the talking to
the box. The seam every engine answers, both halves, is typed in gpuops.engines.seam.
"""

from ..envelope import step
from ..errors import GpuopsError, Rejected, UsageError
from .. import states
from .seam import WorkstationHalf
from typing import Optional


def command_line(host: str, verb, job, *extra, jobs_dir=None, why=None):
    """The next step `gpuops VERB --host H --job J ...`, on the records directory the op used."""
    words = ["gpuops", verb, "--host", host, "--job", job] + list(extra)
    if jobs_dir:
        words += ["--jobs-dir", jobs_dir]
    return step(*words, why=why)


class Engine:
    name = ""  # meta["engine"] and --engine's word
    title = ""  # how a person calls it
    help = ""  # what --engine's help says of it
    detach: str | None = None  # the profile launch.detach that means "this engine runs the jobs"
    flags: dict = {}  # {verb parameter: help} of the flags only this engine takes (launch; see flags_for)
    switches: tuple = ()  # those of its flags that take no value
    states: dict = {}  # its own state words -> the gpuops state (gpuops.states) each is reported as
    stop_target: dict = {}  # the shape of one target of its stop answer (gpuops.boundary.expect)
    meta_fields: dict = {}  # the shape of what its box half adds to a job's record (gpuops.engines.answers)
    job_id_key: str | None = None  # the key its rows and diagnoses carry its own job id under, beside engine_job_id
    # Its job runs on the one box --host names, so gpuops itself composes several (a --torchrun
    # gang across boxes, a --fleet placement); an engine that places jobs on its nodes does not.
    composes = False
    # The run policy's fields (gpuops.jobs.runpolicy) it enforces where the job runs; a policy that
    # asks for another is refused before anything starts, never silently dropped.
    policy_fields: tuple = ()

    # ------------------------------------------------------------ states

    def phases(self):
        """{its state word: phase} for its box half, which may spell no state."""
        return {word: states.PHASES[name] for word, name in self.states.items()}

    def state_of(self, word: object):
        """The gpuops state of one of its words (as its tools print them), or None."""
        return self.states.get(str(word or "").strip().split(" ")[0].rstrip("+").upper())

    def decide(self, row, facts, meta):
        """The state rule: fill `row` (state, reason, exit_code, signal, hint ...) from the box's
        facts of the job and its record. A RUNNING row is then judged for a stall by the caller."""
        raise NotImplementedError

    # ------------------------------------------------------------ flags and submissions

    def flags_for(self, verb):
        """Its flags `verb` takes: launch all of them, retry and queue those that ask for resources."""
        return dict(self.flags)

    def submission(self, opts, asked, torchrun=None):
        """Complete an on-box launch's `opts` with what this engine needs, from its own flags
        `asked` (checked here) and --torchrun's settings. Returns what a rejection is blamed on."""
        self._takes_nothing(asked, torchrun)
        return {}

    def queue_submission(self, opts, asked):
        self._takes_nothing(asked, None)
        return {}

    def check_policy(self, policy):
        """UsageError for a run policy that asks for what this engine does not enforce."""
        missing = sorted(k for k, v in (policy or {}).items()
                         if v not in (None, 0, "") and k not in self.policy_fields and k != "xid_kinds")
        if missing:
            flags = ", ".join("--" + k[:-2 if k.endswith("_s") else None].replace("_", "-") for k in missing)
            raise UsageError(f"{self.title} does not enforce {flags} of a run policy: launch it on the box's "
                             f"supervisor (--engine box), or leave {'them' if len(missing) > 1 else 'it'} out")

    def with_policy(self, opts, policy, given):
        """Put a checked run policy into an on-box launch's `opts` completed by submission() (an
        engine may add what its box half needs to enforce it, or map a field onto its own flags
        `given` on the command line). Returns advice lines: what the policy became."""
        opts["policy"] = policy
        return []

    def retry_opts(self, asked):
        """What a retry sends of the flags `asked` (its parent's engine checks it is this one)."""
        return {}

    def profile_defaults(self, profile):
        """Flag values a platform profile gives every job it launches on this engine: the set
        fields of its table under this engine's name (gpuops.sitedefaults), each its flag's."""
        import dataclasses

        table = profile.engines.get(self.name) if profile is not None else None
        if table is None:
            return {}
        return {f.name: getattr(table, f.name) for f in dataclasses.fields(table) if getattr(table, f.name)}

    def explain_rejection(self, err: Rejected, asked: dict) -> GpuopsError:
        """A rejection from the box (errors.Rejected), said in terms of the flags asked."""
        return err

    def _takes_nothing(self, asked, torchrun):
        if asked:
            from . import refuse_foreign

            refuse_foreign(self, asked)
        if torchrun is not None:
            raise UsageError(f"--torchrun under {self.title} is not something gpuops starts: run torchrun "
                             f"across boxes with --torchrun and several --host boxes (or a --fleet group)")

    # ------------------------------------------------------------ stop

    def plan(self, targets):
        """({what the plan shows}, [[...], ...] the identity of each target) of a stop's plan."""
        return {}, []

    def stop_steps(self, host: str, jid: str, gone: bool, jobs_dir: str | None) -> list:
        """What to run next after a stop that acted (`gone`: every target ended); its words are
        gpuops.render.engines'."""
        return [command_line(host, "retry", jid, jobs_dir=jobs_dir)] if gone else []

    # ------------------------------------------------------------ diagnose and triage

    def diagnosis(self, ev, row, host: str, jobs_dir, triaged=None, pid: Optional[int]=None):
        """{verdict (its document), data, next, advice, ok, what}: why the job stands where it does,
        from the box's evidence, its status row and its log's triage."""
        raise NotImplementedError

    def triage_inputs(self, row, facts):
        """(the state word triage is given, the exit record it may believe) for a job's log."""
        return row["state"], facts.get("exit")

    # ------------------------------------------------------------ preflight

    def present(self, facts) -> bool:
        """Whether the probe's facts show this engine's cluster on the host (then preflight asks
        its box half for the cluster's facts: gpuops.onbox.facts.engine_facts)."""
        return False

    def preflight(self, facts, cluster):
        """Findings about its cluster, from the probe's facts and what its box half saw of the
        cluster (untrusted: check its shape), or {"error": ...} where it could not be asked."""
        return []


# mypy holds the base class to the seam: a default that drifts from it fails the type check.
_SEAM: type[WorkstationHalf] = Engine
