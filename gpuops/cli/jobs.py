"""Detached jobs: `launch`, `status`, `logs`, `wait`, `stop`, `retry`, `queue`."""

import os
import sys
from functools import partial

from .. import engines
from ..errors import UsageError
from ..jobs import torchrun as torchrun_defaults
from ..jobs.spec import check_regex
from ..surface.common import WHICH as _WHICH
from . import engineflags, spinner
from .common import on_hosts, one_host, run, sigterm_interrupts, watched
from .flags import check_words, verb
from .spinner import countdown
from .helptext import missing


def _need_job(verb_name: str, job):
    if not job:
        raise UsageError(missing(verb_name, "--job", _WHICH))


def _env_and_secrets(env, secret_env):
    from ..jobs import spec

    envs = spec.pairs(env, "--env", env_names=True)
    return envs, spec.secrets(secret_env, os.environ, taken=envs)




@engineflags.takes("launch")
@verb("launch")
def launch(c, cmd, script, name, workdir, env, secret_env, label, key, progress_regex, host, identity, gpus, share_gpu,
           profile, jobs_dir, fleet, gpu_type, min_vram_gib, engine, torchrun, nproc_per_node, rdzv_port, rdzv_host,
           code, max_restarts, nnodes, max_retries, retry_on, checkpoint_dir, checkpoint_glob, resume_arg, stall_after,
           max_runtime, keep_checkpoints, keep_best, share_checkpoint_dir, notify, vault, lost_after, stop_when_done,
           output, budget, stop_idle, keeper_host, json, timeout, engine_flags) -> None:
    """Start a command detached on the box (own session, unbuffered log); prints its job id and pid.

    With --fleet, the box is chosen by free GPUs; with --torchrun, one run spans every --host box
    (or every box of the --fleet group);
    with --engine, the job is that engine's (Slurm: a batch job submitted on the login node --host)."""
    asked = engineflags.given(engine_flags)
    picked = {}
    from ..engines import launchrequest
    from ..jobs import spec
    from ..ops import jobs as op
    from ..render import jobs as render
    from . import gang as several

    def produce():
        timeout_s = timeout
        req = launchrequest.build(
            cmd=cmd, script=script, labels=label, env=env, secret_env=secret_env, environ=os.environ,
            progress_regex=progress_regex, profile=profile, engine=engine, resources=asked,
            missing=UsageError(missing("launch", "--cmd", "the command line to run, or --script FILE")),
            policy=dict(max_retries=max_retries, retry_on=retry_on, checkpoint_dir=checkpoint_dir,
                        checkpoint_glob=checkpoint_glob, resume_arg=resume_arg, stall_after=stall_after,
                        max_runtime=max_runtime, keep_checkpoints=keep_checkpoints, keep_best=keep_best,
                        share_checkpoint_dir=share_checkpoint_dir, notify=notify))
        labels, envs, secrets, prof, eng, policy = (req[k] for k in ("labels", "env", "secrets", "profile", "engine",
                                                                     "policy"))
        picked["composes"] = eng.composes
        common = dict(name=name, env=envs, secrets=secrets, workdir=workdir, jobs_dir=jobs_dir, profile=prof)
        from ..keeper import request as kept_request

        keeping = dict(lost_after_s=lost_after, stop_when_done=stop_when_done, outputs=output or (),
                       budget_usd=budget, stop_idle_s=stop_idle)
        if kept_request.asked(vault, keeping) or keeper_host:
            return _kept(vault, fleet, torchrun, host, gpus, policy, cmd, keeping, identity, keeper_host, dict(
                gang=dict(nproc_per_node=nproc_per_node, rdzv_port=rdzv_port, nnodes=nnodes, max_restarts=max_restarts),
                dropped={"--key": key, "--label": label, "--progress-regex": progress_regex, "--share-gpu": share_gpu,
                         "--code": code, "--rdzv-host": rdzv_host},
                gpu_type=gpu_type, min_vram_gib=min_vram_gib, script=script, engine=engine, **common))
        if not eng.composes:
            several.refuse({"--fleet": fleet, "--rdzv-host": rdzv_host, "--code": code},
                           {"--fleet": f"{eng.title} places the job on its own nodes",
                            "--rdzv-host": "it is a --torchrun gang's",
                            "--code": "it is compared across a --torchrun gang's boxes"})
            return on_hosts("launch", host, lambda t: op.launch(
                t, command=cmd, script=script, labels=labels, gpus=spec.gpus(gpus), key=key,
                progress_regex=progress_regex, engine=eng.name, resources=asked, policy=policy,
                torchrun=engineflags.torchrun(torchrun, nproc_per_node, rdzv_port), timeout_s=timeout_s,
                share_gpu=share_gpu, **common), identity)
        if share_gpu and (torchrun or fleet):
            raise UsageError("--share-gpu applies to one --host box's --gpus, not to --fleet or --torchrun")
        if (max_restarts is not None or nnodes) and not (torchrun and (host or fleet) and eng.composes):
            raise UsageError("--max-restarts and --nnodes are torchrun's elastic options: they go with --torchrun "
                             "across --host boxes")
        if torchrun or fleet:
            return several.launch_several(
                host=host, fleet=fleet, torchrun=torchrun, identity=identity, gpus=gpus, gpu_type=gpu_type,
                min_vram_gib=min_vram_gib, cmd=cmd, nproc_per_node=nproc_per_node or 1,
                rdzv_port=rdzv_port or torchrun_defaults.DEFAULT_PORT, rdzv_host=rdzv_host, code=code,
                elastic={"max_restarts": max_restarts, "nnodes": nnodes}, one_job=dict(script=script, key=key, labels=labels, progress_regex=progress_regex,
                             timeout_s=timeout_s, policy=policy), **common)
        several.refuse({"--gpu-type": gpu_type, "--min-vram-gib": min_vram_gib, "--code": code,
                        "--rdzv-host": rdzv_host}, several.NOT_FOR_ONE_BOX)
        pinned = spec.gpus(gpus)
        return on_hosts("launch", host, lambda t: op.launch(
            t, command=cmd, script=script, labels=labels, gpus=pinned, key=key, progress_regex=progress_regex,
            timeout_s=timeout_s, share_gpu=share_gpu, policy=policy, **common), identity)

    from ..render import gang as several_render

    def shown(doc, con) -> None:
        one = not picked.get("composes", True) or not (torchrun or fleet)
        (render.started if one else several_render.launched)(doc, con)  # a scheduler's --torchrun is one job

    run("launch", json, produce, shown)


def _kept(vault, fleet, torchrun, host, gpus, policy, cmd, keeping, identity, keeper_host, asked):
    """launch --fleet F --vault DIR: the run's first attempt and its keeper (gpuops.keeper.start),
    judged by gpuops.keeper.request as an agent's is. With --torchrun, a gang: its first nodes are
    --host's boxes, replacements come from the fleet."""
    from ..jobs import torchrun as defaults
    from ..keeper import request as kept_request
    from ..keeper import start
    from ..remote.hostspec import split_hosts
    from ..surface.jobs import GANG_NODES, GANG_PORT
    from .flags import number

    g = asked.pop("gang")
    gang = dict(g, nproc_per_node=number("--nproc-per-node", g["nproc_per_node"] or 1, *GANG_NODES, integer=True),
                rdzv_port=number("--rdzv-port", g["rdzv_port"] or defaults.DEFAULT_PORT, *GANG_PORT, integer=True,
                                 what="a TCP port")) if torchrun else None
    count = None if gpus is None else int(gpus) if str(gpus).isdigit() else gpus
    spec = kept_request.spec(vault=vault, fleet=fleet, cmd=cmd, policy=policy, keeping=keeping, gpus=count,
                             gang=gang, hosts=split_hosts(host) if host else [], **asked)
    return start.launch(spec, identity, keeper_host=keeper_host)


def _kept_run(job, host: str, gang):
    """The keeper's record of `job` when it names a kept run and no --host or --gang was given."""
    if host or gang or not job:
        return None
    from ..keeper import view

    return view.kept(job)


@verb("status")
def status(c, host, identity, job, label, progress_regex, stall_factor, stall_min, limit, all, verbose, jobs_dir, json,
           gang, watch):
    """Job states derived from the box's records: running, stalled, ended (and how), vanished, unreachable."""
    from ..jobs import spec
    from ..ops import jobs as op
    from ..render import jobs as render

    kept = _kept_run(job, host, gang)
    if kept is not None:  # a run a keeper looks after (launch --vault): its record here says where it is
        from ..keeper import view

        return run("status", json, lambda: view.status(kept), view.show)

    def produce():
        if watch and (json or gang):
            raise UsageError("--watch redraws one host's table for people: leave out --json and --gang")
        if gang:
            _gang_alone(host, job)
            from . import gang as several

            return several.status(gang, identity)
        where = one_host("status", host) if watch else host  # a table redrawn is one host's
        check_regex(progress_regex)
        labels = spec.pairs(label, "--label")
        ask = partial(on_hosts, "status", where, lambda t: op.status(
            t, job=job, labels=labels, progress_regex=progress_regex, stall_factor=stall_factor, stall_min_s=stall_min,
            limit=limit, jobs_dir=jobs_dir, all_attempts=all), identity)
        return watched(watch, ask, partial(render.status_view, verbose=detailed), f"asking {where} for its jobs")

    from ..render import gang as several_render

    detailed = verbose or bool(job)  # the one job asked about is shown in full
    run("status", json, produce, several_render.status if gang else partial(render.status, verbose=detailed),
        waiting=not watch)  # --watch: its own


@verb("logs")
def logs(c, host, identity, job, attempt, tail, follow, from_offset, max_bytes, timeout, save, reconnect, jobs_dir,
         json, raw, gang, cursors, node) -> None:
    """A job's log: an exact page from a tail or an offset, or --follow to the end (or --timeout)."""
    from ..ops import joblogs as op
    from ..remote.targets import target_for
    from ..render import jobs as render

    shown = _stdout_sink(raw)
    kept = _kept_run(job, host, gang)
    try:
        now = _kept_node(kept, node, follow or from_offset is not None or save)
    except UsageError as bad:
        def refused():
            raise bad

        return run("logs", json, refused, render.logs_trailer)
    if now is not None:  # a kept run's log is its current attempt's (or --node's), on the box it runs on now
        from ..keeper import nodelog
        from ..render import inert

        lost = f"; its box was lost ({now['lost']}): the log as the keeper last copied it to the vault" \
            if now["lost"] else ""
        print(inert.text(f"run {job}: attempt {now['attempt']} on {now['box']} (job {now['job']}){lost}"),
              file=sys.stderr)
        if now["lost"]:  # its box no longer answers: the log as the keeper last copied it into the vault
            def copied():
                try:
                    return nodelog.page(kept, now, tail, None if json else shown)
                finally:
                    shown(None)

            return run("logs", json, copied, render.logs_trailer, waiting=None)
        host, job, jobs_dir = now["box"], now["job"], jobs_dir or kept["spec"].get("jobs_dir")

    def produce():
        if gang:
            _gang_alone(host, job)
            if save or from_offset is not None:
                raise UsageError("--save and --from-offset are one job's; a gang's log goes on from --cursors")
            from . import gang as several

            try:
                with sigterm_interrupts(follow):
                    return several.logs(gang, tail=tail, cursors=cursors, follow=follow, timeout=timeout,
                                        max_bytes=max_bytes, sink=None if json else shown, identity=identity)
            finally:
                shown(None)
        if cursors:
            raise UsageError("--cursors goes with --gang; one job's log goes on from --from-offset")
        _need_job("logs", job)
        if timeout is not None and not follow:
            raise UsageError("--timeout applies to --follow only (a page returns at once)")
        spec = one_host("logs", host)
        sink = None if json else shown
        target = target_for(spec, identity)
        try:
            with sigterm_interrupts(follow):
                doc = op.logs(target, job=job, tail=tail, follow=follow, from_offset=from_offset, save=save,
                              jobs_dir=jobs_dir, sink=sink, reconnect_s=reconnect, max_bytes=max_bytes, timeout_s=timeout,
                              notice=lambda m: print(m, file=sys.stderr, flush=True), attempt=attempt)
        finally:
            target.close()
            shown(None)
        doc["host"] = spec
        return doc

    from ..render import gang as several_render

    # the log itself is what it shows: a spinner only while connecting
    run("logs", json, produce, several_render.logs_trailer if gang else render.logs_trailer, waiting=None)


def _kept_node(kept, node, streams) -> dict | None:
    """Where `logs` of a kept run reads: {attempt, box, job, lost} of --node (gpuops.keeper.nodelog),
    else of the current attempt's head; None for a job that is no kept run."""
    if kept is None:
        if node is not None:
            raise UsageError("--node goes with a kept gang's run id (launch --torchrun --vault): gpuops logs RUN "
                             "--node N")
        return None
    from ..keeper import nodelog

    if node is None:
        now = kept["attempts"][-1]
        return {"attempt": len(kept["attempts"]), "box": now["box"], "job": now["job"], "lost": None}
    where = nodelog.locate(kept, node)
    if where["lost"] and streams:
        raise UsageError(f"--node {node}: its box was lost; the vault's copy of its log is read with --tail")
    return where


def _gang_alone(host: str, job):
    if host or job:
        raise UsageError("--gang names the gang's boxes and jobs itself: leave out --host and --job")


@verb("wait")
def wait(c, host, identity, job, until, after_event, log_regex, from_offset, timeout, max_bytes, jobs_dir, json,
         gang):
    """Wait on the box until the job reaches a state or its log matches; exit 0 reached, 6 timed out."""
    from ..ops import wait as op
    from ..render import jobs as render
    from ..render import gang as several_render

    kept = _kept_run(job, host, gang)
    if kept is not None:  # a kept run ends when its keeper has done all it was asked
        from ..keeper import view

        def waited():
            with sigterm_interrupts(True), spinner.show(countdown(f"waiting for run {job}", timeout)):
                return view.wait(kept, timeout)

        return run("wait", json, waited, view.show, waiting=None)

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
        spec = one_host("wait", host)
        what = "the end" if until == "terminal" else ",".join(wanted)
        with sigterm_interrupts(True), spinner.show(countdown(f"waiting for {job} to reach {what}", timeout)):
            return on_hosts("wait", spec, lambda t: op.wait(
                t, job=job, until=wanted, log_regex=log_regex, from_offset=from_offset, timeout_s=timeout,
                max_bytes=op.TEXT_BYTES if max_bytes is None else max_bytes, jobs_dir=jobs_dir,
                after_event=after_event), identity)

    run("wait", json, produce, several_render.status if gang else render.waited, waiting=None)


def _stdout_sink(raw):
    """Where a log's bytes go: stdout, each control sequence but colours escaped (the box wrote
    them: gpuops.render.inert.LogBytes), or with --raw exactly as written. None flushes the end."""
    from ..render.inert import LogBytes

    kept, last = None if raw else LogBytes(), [b"\n"]

    def sink(data) -> None:
        shown = data if kept is None else kept.close() if data is None else kept.feed(data)
        if data is None and last[0] != b"\n" and sys.stdout.isatty():
            shown = (shown or b"") + b"\n"  # a page cut mid-line: gpuops' closing line starts on its own
        if shown:
            sys.stdout.buffer.write(shown)
            sys.stdout.buffer.flush()
            last[0] = shown[-1:]

    return sink


@verb("stop")
def stop(c, host, identity, job, grace, yes, plan, signal, jobs_dir, json, gang) -> None:
    """SIGTERM the job's process group, SIGKILL after --grace; confirm every process is gone (Slurm: scancel)."""
    from ..ops import jobs as op
    from ..render import jobs as render

    kept = _kept_run(job, host, gang)
    if kept is not None:  # a kept run: its keeper stops it, wherever the keeper runs
        from ..keeper import view

        return run("stop", json, lambda: view.stop(kept, yes=yes, plan=plan), render.stop)

    def produce():
        if gang:
            _gang_alone(host, job)
            from . import gang as several

            return several.stop(gang, grace=grace, yes=yes, plan=plan, identity=identity)
        _need_job("stop", job)
        spec = one_host("stop", host)
        return on_hosts("stop", spec, lambda t: op.stop(t, job=job, grace=grace, yes=yes, plan=plan, signal=signal,
                                                        jobs_dir=jobs_dir), identity)

    from ..render import gang as several_render

    run("stop", json, produce, several_render.stop if gang else render.stop)


@engineflags.takes("retry", "; replaces the parent's")
@verb("retry")
def retry(c, host, identity, job, env, secret_env, resume_arg, checkpoint_dir, key, jobs_dir, json, gang,
          engine_flags) -> None:
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
@verb("queue")
def queue(c, host, identity, file, name, env, secret_env, workdir, gpus, wait, cancel, jobs_dir, json, engine,
          engine_flags) -> None:
    """A sequential run queue: each line a normal job, resumable, append-safe (Slurm: a dependency chain)."""
    asked = engineflags.given(engine_flags)
    from ..jobs import spec
    from ..ops import jobs as op
    from ..render import jobs as render

    def produce():
        if not file and not name:
            raise UsageError(missing("queue", "--file", "one command a line: starts, extends or resumes a queue; "
                                              "or --name to show one"))
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
            wait=wait, cancel=cancel, jobs_dir=jobs_dir, engine=eng.name, resources=asked), identity)

    run("queue", json, produce, render.queue)


TASKS = (launch, status, logs, wait, stop, retry, queue)
