"""Detached jobs: `launch`, `status`, `logs`, `wait`, `stop`, `retry`, `queue`."""

import os
import sys
from functools import partial

from .. import engines
from ..errors import UsageError
from ..jobs import states
from ..jobs import torchrun as torchrun_defaults
from . import engineflags, runflags, spinner
from .common import on_hosts, one_host, run, sigterm_interrupts, watched
from .flags import DAY, check_regex, check_words, number, seconds, verb
from .spinner import countdown
from .helptext import missing

_COMMON = {
    "host": "'local' (default), an ssh_config alias or user@host:port",
    "identity": "SSH private key file to use",
    "json": "print one JSON envelope instead of tables",
    "jobs_dir": "job records directory on the box (default: $GPUOPS_JOBS_DIR there, else ~/.gpuops/jobs)",
}
_ENV = "KEY=VALUE set in the job's environment (repeatable)"
_SECRET = ("NAME of a variable in YOUR local environment whose value is passed to the job through stdin "
           "only: never in argv, files or output (repeatable)")


def _help(**extra):
    return dict(_COMMON, **extra)


_SEVERAL = "'local' (default), an ssh_config alias or user@host:port; comma-separate several"
_WHICH = "the job's id or a unique part of it, its --key or its --name"


def _need_job(verb_name, job):
    if not job:
        raise UsageError(missing(verb_name, "--job", _WHICH))


def _env_and_secrets(env, secret_env):
    from ..jobs import spec

    envs = spec.pairs(env, "--env", env_names=True)
    return envs, spec.secrets(secret_env, os.environ, taken=envs)


@engineflags.takes("launch")
@runflags.takes()
@verb(iterable=["label", "env", "secret_env"], help=_help(
    host=_SEVERAL,
    cmd="the command line to run (bash syntax; stored verbatim and run exactly as given)",
    script="a local script file to copy to the box and run (its #! line is honoured, else bash)",
    name="a name for the job (any text)",
    label="k=v label, for filtering with status --label (repeatable)",
    workdir="directory on the box to run in (default: the remote home)",
    env=_ENV,
    secret_env=_SECRET,
    gpus="on a --host box: which GPUs, as indices or UUIDs for CUDA_VISIBLE_DEVICES (e.g. 0,1); with --fleet: how "
         "many free GPUs the job needs (e.g. 4), the box and its GPUs are then chosen for it",
    key="idempotency key: if a job with this key exists, return it instead of starting another",
    progress_regex="extra regex for training-progress lines (group 1 = step number), kept for status",
    profile="platform profile: its job dir, HF_HOME, fixed env and proxy hook apply (see `gpuops profiles`); "
            "a Slurm profile's site defaults too",
    timeout="seconds the launch may take on the box",
    fleet="place the job on the least loaded box of this fleet (a [fleet.NAME] group or a fleet file) with "
          "--gpus N free GPUs; nothing fitting is exit 5 and launches nothing. With --torchrun: the gang is "
          "every box of the group, in its order",
    gpu_type="with --fleet: only GPUs whose model names this (H100, A100-SXM4-80GB, ...)",
    min_vram_gib="with --fleet: only GPUs with at least this much memory (GiB)",
    torchrun="one training run across every --host box (or every box of a --fleet group, in its order): a gang "
             "preflight, then torchrun on each (c10d "
             "rendezvous on the first box); prints the gang id the other verbs take with --gang. With an --engine "
             "that schedules nodes (Slurm: srun), torchrun runs on every node of the allocation (c10d on its first)",
    nproc_per_node="with --torchrun: processes (GPUs) per box or node (default 1; under Slurm: --gpus-per-node)",
    rdzv_port="with --torchrun: the rendezvous port on the first box or node (default 29500; under Slurm, a "
              "free one when it is taken there)",
    rdzv_host="with --torchrun: the first box's address as the others reach it (default: its SSH HostName)",
    code="with --torchrun: a directory on the boxes that must be identical on all of them (sha256 compared)",
    engine=engines.help_text(),
))
def launch(c, host=None, identity=None, cmd=None, script=None, name=None, label=None, workdir=None, env=None,
           secret_env=None, gpus=None, key=None, progress_regex=None, jobs_dir=None, profile=None, json=False,
           timeout="60", fleet=None, gpu_type=None, min_vram_gib=None, torchrun=False, nproc_per_node=None,
           rdzv_port=None, rdzv_host=None, code=None, engine=None, engine_flags=None, run_flags=None):
    """Start a command detached on the box (own session, unbuffered log); prints its job id and pid.

    With --fleet, the box is chosen by free GPUs; with --torchrun, one run spans every --host box
    (or every box of the --fleet group);
    with --engine, the job is that engine's (Slurm: a batch job submitted on the login node --host)."""
    asked = engineflags.given(engine_flags)
    picked = {}
    from ..jobs import spec
    from ..ops import jobs as op
    from ..render import jobs as render
    from . import gang as several

    def produce():
        timeout_s = seconds("--timeout", timeout, low=1, whole=True)
        if not cmd and not script:
            raise UsageError(missing("launch", "--cmd", "the command line to run, or --script FILE"))
        if cmd and script:
            raise UsageError("give one of --cmd or --script, not both")
        if script:
            if not os.path.isfile(script):
                raise UsageError(f"--script {script}: no such file")
            with open(script, "rb") as f:
                problem = spec.script_problem(f.read())
            if problem:
                raise UsageError(f"--script {script}: {problem}")
        check_regex(progress_regex)
        labels = spec.pairs(label, "--label")
        envs, secrets = _env_and_secrets(env, secret_env)
        policy = runflags.policy(run_flags)
        prof = None
        if profile:
            from .. import profiles

            prof = profiles.load(profile)
        eng = engineflags.chosen(engine, prof, engine_flags)
        picked["composes"] = eng.composes
        common = dict(name=name, env=envs, secrets=secrets, workdir=workdir, jobs_dir=jobs_dir, profile=prof)
        if not eng.composes:
            several.refuse({"--fleet": fleet, "--rdzv-host": rdzv_host, "--code": code},
                           {"--fleet": f"{eng.title} places the job on its own nodes",
                            "--rdzv-host": "it is a --torchrun gang's",
                            "--code": "it is compared across a --torchrun gang's boxes"})
            return on_hosts("launch", host, lambda t: op.launch(
                t, command=cmd, script=script, labels=labels, gpus=spec.gpus(gpus), key=key,
                progress_regex=progress_regex, engine=eng.name, resources=asked, policy=policy,
                torchrun=engineflags.torchrun(torchrun, nproc_per_node, rdzv_port), timeout_s=timeout_s, **common), identity)
        if torchrun or fleet:
            return several.launch_several(
                host=host, fleet=fleet, torchrun=torchrun, identity=identity, gpus=gpus, gpu_type=gpu_type,
                min_vram_gib=min_vram_gib, cmd=cmd, nproc_per_node=nproc_per_node or "1",
                rdzv_port=rdzv_port or str(torchrun_defaults.DEFAULT_PORT), rdzv_host=rdzv_host, code=code,
                one_job=dict(script=script, key=key, labels=labels, progress_regex=progress_regex,
                             timeout_s=timeout_s), **common)
        several.refuse({"--gpu-type": gpu_type, "--min-vram-gib": min_vram_gib, "--code": code,
                        "--rdzv-host": rdzv_host}, several.NOT_FOR_ONE_BOX)
        pinned = spec.gpus(gpus)
        return on_hosts("launch", host, lambda t: op.launch(
            t, command=cmd, script=script, labels=labels, gpus=pinned, key=key, progress_regex=progress_regex,
            timeout_s=timeout_s, policy=policy, **common), identity)

    from ..render import gang as several_render

    def shown(doc, con):
        one = not picked.get("composes", True) or not (torchrun or fleet)
        (render.started if one else several_render.launched)(doc, con)  # a scheduler's --torchrun is one job

    run("launch", json, produce, shown)


@verb(iterable=["label"], help=_help(
    host=_SEVERAL,
    job="one job: " + _WHICH + " (default: list recent jobs). States: " + states.listing(),
    label="only jobs with this k=v label (repeatable)",
    progress_regex="regex for training-progress lines (group 1 = step), tried before the built-in ones",
    stall_factor="STALLED when no progress line for this many times the recent step time",
    stall_min="...and for at least this many seconds (without a known step time: the larger of this and 1800)",
    limit="list at most this many jobs, newest first (0: all of them)",
    gang="a gang id (launch --torchrun prints it): every node at once; --host is not needed",
    watch="redraw the table in place, asking again each second, until Ctrl-C (then print the last one)",
))
def status(c, host=None, identity=None, job=None, label=None, progress_regex=None, stall_factor="10",
           stall_min="600", limit="20", jobs_dir=None, json=False, gang=None, watch=False):
    """Job states derived from the box's records: running, stalled, ended (and how), vanished, unreachable."""
    from ..jobs import spec
    from ..ops import jobs as op
    from ..render import jobs as render

    def produce():
        if watch and (json or gang):
            raise UsageError("--watch redraws one host's table for people: leave out --json and --gang")
        if gang:
            _gang_alone(host, job)
            from . import gang as several

            return several.status(gang, identity)
        where = one_host("status", host) if watch else host  # a table redrawn is one host's
        factor = number("--stall-factor", stall_factor, 0, 1000)
        floor = seconds("--stall-min", stall_min, high=30 * DAY)
        most = number("--limit", limit, 0, 100000, integer=True)
        check_regex(progress_regex)
        labels = spec.pairs(label, "--label")
        ask = partial(on_hosts, "status", where, lambda t: op.status(
            t, job=job, labels=labels, progress_regex=progress_regex, stall_factor=factor, stall_min_s=floor,
            limit=most, jobs_dir=jobs_dir), identity)
        return watched(watch, ask, render.status_view, f"asking {where} for its jobs")

    from ..render import gang as several_render

    run("status", json, produce, several_render.status if gang else render.status, waiting=not watch)  # --watch: its own


@verb(help=_help(
    job=_WHICH,
    json="the page as one JSON envelope (control characters escaped); without it the log's bytes are printed as "
         "the job wrote them, escape sequences included, as `cat` would",
    tail="show the last N lines (default 100)",
    follow="keep streaming until the job ends; survives a dropped link by resuming at the last byte",
    from_offset="start at this byte offset (as returned in next_offset) instead of the tail",
    max_bytes="a page holds at most this many bytes (default: 64 KiB with --json, else 1 MiB); with --json "
              "--follow, the text keeps the newest this many",
    timeout="with --follow: stop following after this many seconds (exit 6, next_offset says where to resume)",
    save="copy the whole log (and the job's records) to DIR/<job>/, resuming an earlier copy",
    reconnect="seconds --follow keeps trying to reconnect after the link drops",
    gang="a gang id (launch --torchrun prints it): every node at once; --host is not needed",
    cursors="with --gang: where each node's log goes on, NODE=OFFSET,... (the cursors a page or follow printed)",
))
def logs(c, host=None, identity=None, job=None, tail="100", follow=False, from_offset=None, max_bytes=None,
         timeout=None, save=None, reconnect="120", jobs_dir=None, json=False, gang=None, cursors=None):
    """A job's log: an exact page from a tail or an offset, or --follow to the end (or --timeout)."""
    from ..ops import joblogs as op
    from ..remote.targets import target_for
    from ..render import jobs as render

    def produce():
        if gang:
            _gang_alone(host, job)
            if save or from_offset is not None:
                raise UsageError("--save and --from-offset are one job's; a gang's log goes on from --cursors")
            from . import gang as several

            with sigterm_interrupts(follow):
                return several.logs(gang, tail=tail, cursors=cursors, follow=follow, timeout=timeout,
                                    max_bytes=max_bytes, sink=None if json else _stdout_sink, identity=identity)
        if cursors:
            raise UsageError("--cursors goes with --gang; one job's log goes on from --from-offset")
        _need_job("logs", job)
        lines = number("--tail", tail, 0, 1000000, integer=True)
        offset = number("--from-offset", from_offset, 0, 2 ** 63 - 1, integer=True, what="a byte offset")
        most = number("--max-bytes", max_bytes, 1, op.MAX_BYTES, integer=True)
        limit = seconds("--timeout", timeout, high=30 * DAY)
        if limit is not None and not follow:
            raise UsageError("--timeout applies to --follow only (a page returns at once)")
        patience = seconds("--reconnect", reconnect)
        spec = one_host("logs", host)
        sink = None if json else _stdout_sink
        target = target_for(spec, identity)
        try:
            with sigterm_interrupts(follow):
                doc = op.logs(target, job=job, tail=lines, follow=follow, from_offset=offset, save=save,
                              jobs_dir=jobs_dir, sink=sink, reconnect_s=patience, max_bytes=most, timeout_s=limit,
                              notice=lambda m: print(m, file=sys.stderr, flush=True))
        finally:
            target.close()
        doc["host"] = spec
        return doc

    from ..render import gang as several_render

    # the log itself is what it shows: a spinner only while connecting
    run("logs", json, produce, several_render.logs_trailer if gang else render.logs_trailer, waiting=None)


def _gang_alone(host, job):
    if host or job:
        raise UsageError("--gang names the gang's boxes and jobs itself: leave out --host and --job")


@verb(help=_help(
    job=_WHICH,
    until="'terminal' (default), 'event' (a run's next event) or states to wait for, comma-separated: " + ", ".join(
        s for s in states.NAMES if s not in (states.PENDING, states.UNREACHABLE, states.DEGRADED)),
    after_event="with a run: its events after this seq (an event's seq) come back, and --until event returns at "
                "the first (default: those from now on)",
    log_regex="also return as soon as a log line (after --from-offset) matches this regular expression",
    from_offset="look for --log-regex from this byte offset (a next_offset); default 0, the log's start",
    timeout="seconds to wait at most (exit 6 when it passes first)",
    max_bytes="new_text holds at most this many bytes, the newest before next_offset (default 64 KiB)",
    gang="a gang id (launch --torchrun prints it): until the whole gang reaches --until; --host is not needed",
))
def wait(c, host=None, identity=None, job=None, until="terminal", log_regex=None, from_offset=None,
         timeout="300", max_bytes=None, jobs_dir=None, json=False, gang=None, after_event=None):
    """Wait on the box until the job reaches a state or its log matches; exit 0 reached, 6 timed out."""
    from ..ops import wait as op
    from ..render import jobs as render
    from ..render import gang as several_render

    def produce():
        wanted = op.parse_until(until)
        if gang:
            _gang_alone(host, job)
            if op.EVENT in wanted:
                raise UsageError("--until event waits on a run's events; a gang's nodes are waited on by state")
            from . import gang as several

            with sigterm_interrupts(True):
                return several.wait(gang, until=wanted, timeout=timeout, identity=identity)
        _need_job("wait", job)
        check_regex(log_regex, "--log-regex")
        offset = number("--from-offset", from_offset, 0, 2 ** 63 - 1, integer=True, what="a byte offset")
        limit = seconds("--timeout", timeout, high=7 * DAY)
        most = number("--max-bytes", max_bytes, 0, op.MAX_TEXT_BYTES, integer=True)
        seq = number("--after-event", after_event, 0, 2 ** 62, integer=True, what="an event's seq")
        spec = one_host("wait", host)
        what = "the end" if until == "terminal" else ",".join(wanted)
        with sigterm_interrupts(True), spinner.show(countdown(f"waiting for {job} to reach {what}", limit)):
            return on_hosts("wait", spec, lambda t: op.wait(
                t, job=job, until=wanted, log_regex=log_regex, from_offset=offset, timeout_s=limit,
                max_bytes=op.TEXT_BYTES if most is None else most, jobs_dir=jobs_dir, after_event=seq), identity)

    run("wait", json, produce, several_render.status if gang else render.waited, waiting=None)


def _stdout_sink(data):
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


@verb(help=_help(
    job=_WHICH,
    grace="seconds between SIGTERM and SIGKILL",
    yes="really send the signals (without it: show what would be signalled, and its plan id)",
    plan="with --yes: act only if the job's live processes are still those of this plan id (from a dry run); "
         "else exit 5 with the new plan",
    gang="a gang id (launch --torchrun prints it): every node at once; --host is not needed",
    signal="Slurm: send this checkpoint signal first (e.g. USR1) and give the job up to --grace seconds to end "
           "before scancel",
))
def stop(c, host=None, identity=None, job=None, grace="10", yes=False, plan=None, signal=None, jobs_dir=None,
         json=False, gang=None):
    """SIGTERM the job's process group, SIGKILL after --grace; confirm every process is gone (Slurm: scancel)."""
    from ..ops import jobs as op
    from ..render import jobs as render

    def produce():
        if gang:
            _gang_alone(host, job)
            from . import gang as several

            return several.stop(gang, grace=grace, yes=yes, plan=plan, identity=identity)
        _need_job("stop", job)
        wait = seconds("--grace", grace)
        spec = one_host("stop", host)
        return on_hosts("stop", spec, lambda t: op.stop(t, job=job, grace=wait, yes=yes, plan=plan, signal=signal,
                                                        jobs_dir=jobs_dir), identity)

    from ..render import gang as several_render

    run("stop", json, produce, several_render.stop if gang else render.stop)


@engineflags.takes("retry", "; replaces the parent's")
@verb(iterable=["env", "secret_env"], help=_help(
    job="the job to retry: " + _WHICH,
    env=_ENV + "; overrides the parent's",
    secret_env=_SECRET,
    resume_arg="text appended to the command (or extra script arguments), e.g. '--resume last.ckpt'; with "
               "{checkpoint}, the newest complete checkpoint's path goes there, quoted",
    checkpoint_dir="with --resume-arg '... {checkpoint}': DIR[:GLOB] of the checkpoints (default: its run's)",
    key="idempotency key for the retry itself",
    gang="a gang id (launch --torchrun prints it): every node at once; --host is not needed",
))
def retry(c, host=None, identity=None, job=None, env=None, secret_env=None, resume_arg=None, key=None,
          jobs_dir=None, json=False, gang=None, engine_flags=None, checkpoint_dir=None):
    """Start a child job from the same immutable command, with parent_job_id set (Slurm: new resources too)."""
    asked = engineflags.given(engine_flags)
    from ..ops import jobs as op
    from ..render import jobs as render

    def produce():
        check_words(resume_arg)
        envs, secrets = _env_and_secrets(env, secret_env)
        if gang:
            _gang_alone(host, job)
            if asked:
                raise UsageError(f"{', '.join(map(engines.flag_of, asked))} retry an engine's job, not a gang")
            from . import gang as several

            return several.retry(gang, resume_arg=resume_arg, env=envs, secrets=secrets, identity=identity)
        _need_job("retry", job)
        spec = one_host("retry", host)
        return on_hosts("retry", spec, lambda t: op.retry(t, job=job, env=envs, secrets=secrets,
                                                          resume_arg=resume_arg, key=key, jobs_dir=jobs_dir,
                                                          resources=asked, checkpoint_dir=checkpoint_dir), identity)

    from ..render import gang as several_render

    run("retry", json, produce, several_render.launched if gang else render.started)


@engineflags.takes("queue")
@verb(iterable=["env", "secret_env"], help=_help(
    host=_SEVERAL,
    file="local file: one command per line (# comments and blank lines skipped); re-run with more lines "
         "appended to extend a running queue, or unchanged to resume it",
    name="queue name on the box (default: from the file name)",
    env=_ENV + ", for every entry",
    secret_env=_SECRET,
    workdir="directory on the box every entry runs in",
    gpus="CUDA_VISIBLE_DEVICES for every entry",
    wait="wait up to this many seconds for the queue to finish",
    cancel="start no further entries (the running one keeps running: stop it with `gpuops stop`)",
    engine=engines.help_text() + "; an engine that chains the entries itself (Slurm: --dependency=afterany) "
                                 "starts each after the one before it ended",
))
def queue(c, host="local", identity=None, file=None, name=None, env=None, secret_env=None, workdir=None, gpus=None,
          wait="0", cancel=False, jobs_dir=None, json=False, engine=None, engine_flags=None):
    """A sequential run queue: each line a normal job, resumable, append-safe (Slurm: a dependency chain)."""
    asked = engineflags.given(engine_flags)
    from ..jobs import spec
    from ..ops import jobs as op
    from ..render import jobs as render

    def produce():
        if not file and not name:
            raise UsageError(missing("queue", "--file", "one command a line: starts, extends or resumes a queue; "
                                              "or --name to show one"))
        patience = seconds("--wait", wait, high=7 * DAY)
        content = None
        if file:
            try:
                with open(file, encoding="utf-8") as f:
                    content = f.read().replace("\r\n", "\n")
            except OSError as e:
                raise UsageError(f"--file {file}: {e.strerror}") from None
            except UnicodeDecodeError:
                raise UsageError(f"--file {file}: not UTF-8 text") from None
        qname = name or spec.slug(os.path.splitext(os.path.basename(file))[0])
        envs, secrets = _env_and_secrets(env, secret_env)
        eng = engineflags.chosen(engine, None, engine_flags)
        return on_hosts("queue", host, lambda t: op.queue(
            t, name=qname, content=content, env=envs, secrets=secrets, workdir=workdir, gpus=spec.gpus(gpus),
            wait=patience, cancel=cancel, jobs_dir=jobs_dir, engine=eng.name, resources=asked), identity)

    run("queue", json, produce, render.queue)


TASKS = (launch, status, logs, wait, stop, retry, queue)
