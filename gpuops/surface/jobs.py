"""The job verbs: launch, status, logs, wait, stop, pause, resume, retry, queue, and their tools."""

from .. import engines
from .. import states
from .common import (ATTEMPT, CALL_S, DAY, ENV, ENVS, FAILED_ONLY, FIELDS, GANG, GRACE_S, HOST1, HOST_TIP, HOST_WORDS,
                     IDENTITY, JOB, JOB_TIP, JOBS_DIR, JSON, LABEL, PAGE, PLAN_TIP, SECRET_ENV, SEVERAL, WAIT_S, WATCH,
                     WHICH, YES_PLAN_TIP, host)
from .model import (CHOICE, CSV, ENDS, INT, LIST, NUM, OBJECT, PAIRS, READS, RUNS, SECS, STATES, SWITCH, TEXT,
                    Param, Tool, Verb, a, sectioned)
from .runs import KEEPER, RUN_POLICY

JOBS = "jobs"
GANG_NODES = (1, 64)           # processes per box a gang takes
GANG_PORT = (1024, 65535)      # its rendezvous port
WAITABLE = tuple(s for s in states.NAMES if s not in (states.PENDING, states.UNREACHABLE, states.DEGRADED))
EVENT = "event"  # --until event: a run's next event (gpuops.ops.wait)
TAIL_LINES = "last N lines"
STATUS_ROWS = 5  # job_status's rows unless asked for more: an answer under 2,000 characters (issue 37)
STATUS_ROWS_MAX = 200  # the most it lists; failed_only looks among this many, however few it shows

RESOURCES = a("resources", kind=OBJECT, why="the engine's own flags (--nodes, --time ...) as one object",
              tip="the engine's flags by name, e.g. slurm {\"nodes\": 2}")
KEPT_HOST = a("host", tip=HOST_TIP + "; omit for a kept run")  # launched with a vault: its keeper's record
ENGINE = Param("engine", CHOICE, engines.help_text(), tip="who runs the job (default box)",
               choices=tuple(engines.names()))


def _over(arg, **changes) -> dict:
    """The fields of a tool's own Arg, some changed, for another tool's."""
    return dict(dict(kind=arg.kind, tip=arg.tip, default=arg.default, why=arg.why), **changes)


def _yes(help):
    return (Param("yes", SWITCH, help, tip=YES_PLAN_TIP),)


# a kept run's fields (gpuops.keeper.request), the same on fleet_launch and gang_launch
_KEPT = (a("vault"), a("lost_after_s", "lost_after"), a("stop_when_done"), a("stop_idle_s", "stop_idle"), a("budget"),
         a("keeper_host"))

LAUNCH = Verb("launch", "Jobs", RUNS, line="start a detached job, or a run with a policy", engine_flags=True,
              examples=("gpuops launch --host box --name train --cmd 'python train.py'",
                        "gpuops launch --fleet train --gpus 4 --gpu-type H100 --cmd 'python train.py'",
                        "gpuops launch --host a,b --torchrun --nproc-per-node 8 --cmd 'train.py --lr 3e-4'",
                        "gpuops launch --host login --engine slurm --nodes 2 --gpus-per-node 8 --time 4:00:00 "
                        "--signal USR1@120 --torchrun --cmd 'train.py --resume auto'"),
              **sectioned(
    ("What to run", (
        Param("cmd", TEXT, "the command line to run (bash syntax; stored verbatim and run exactly as given)",
              tip="bash command line, run as given"),
        Param("script", TEXT, "a local script file to copy to the box and run (its #! line is honoured, else bash)",
              tip="instead of cmd: a local script to run (under GPUOPS_MCP_ROOTS)"),
        Param("name", TEXT, "a name for the job (any text)", tip="a name later calls may use for the job"),
        Param("workdir", TEXT, "directory on the box to run in (default: the remote home)", tip="directory on the box"),
        ENV,
        SECRET_ENV,
        LABEL,
        Param("key", TEXT, "idempotency key: if a job with this key exists, return it instead of starting another",
              tip="idempotency key: an existing job with it is returned"),
        Param("progress_regex", TEXT, "extra regex for training-progress lines (group 1 = step number), kept for "
                                      "status",
              tip="regex of progress lines (group 1 = step)"),
    )),
    ("Where it runs", (
        host(SEVERAL),
        IDENTITY,
        Param("gpus", TEXT, "on a --host box: which GPUs, as indices or UUIDs for CUDA_VISIBLE_DEVICES (e.g. 0,1); "
                            "with "
                            "--fleet: how many free GPUs the job needs (e.g. 4), the box and its GPUs are then chosen "
                            "for it", tip="CUDA_VISIBLE_DEVICES, e.g. '0,1'"),
        Param("share_gpu", SWITCH, "with --gpus on a --host box: start even on a GPU a running gpuops job is pinned to "
                                   "(else refused)", tip="with gpus: also on a GPU another job is pinned to"),
        Param("profile", TEXT, "platform profile: its job dir, HF_HOME, fixed env and proxy hook apply (see `gpuops "
                               "profiles`); a Slurm profile's site defaults too",
              tip="platform profile (see profiles_show)"),
        JOBS_DIR,
        Param("fleet", TEXT, "place the job on the least loaded box of this fleet (a [fleet.NAME] group or a fleet "
                             "file) with --gpus N free GPUs; nothing fitting is exit 5 and launches nothing. With "
                             "--torchrun: "
                             "the gang is every box of the group, in its order",
              tip="a [fleet.NAME] group of the server's fleet file; default: every box in it"),
        Param("gpu_type", TEXT, "with --fleet: only GPUs whose model names this (H100, A100-SXM4-80GB, ...)",
              tip="only GPUs whose model names this (H100, A100-SXM4-80GB)"),
        Param("min_vram_gib", NUM, "with --fleet: only GPUs with at least this much memory (GiB)",
              tip="only GPUs with this much memory", low=0.001, high=4096, what="GiB"),
    )),
    ("Engine (--engine)", (
        ENGINE,
    )),
    ("torchrun across boxes (--torchrun)", (
        Param("torchrun", SWITCH, "one training run across every --host box (or every box of a --fleet group, in its "
                                  "order): a gang preflight, then torchrun on each (c10d rendezvous on the first box); "
                                  "prints the gang id the other verbs take with --gang. With an --engine that "
                                  "schedules "
                                  "nodes (Slurm: srun), torchrun runs on every node of the allocation (c10d on its "
                                  "first)"),
        Param("nproc_per_node", INT, "with --torchrun: processes (GPUs) per box or node (default 1; under Slurm: "
                                     "--gpus-per-node)", tip="processes (GPUs) per box", low=1, high=1024),
        Param("rdzv_port", INT, "with --torchrun: the rendezvous port on the first box or node (default 29500; under "
                                "Slurm, a free one when it is taken there)", tip="rendezvous port on the first box",
              low=1, high=65535, what="a TCP port"),
        Param("rdzv_host", TEXT, "with --torchrun: the first box's address as the others reach it (default: its SSH "
                                 "HostName)", tip="first box's address as the others reach it"),
        Param("code", TEXT, "with --torchrun: a directory on the boxes that must be identical on all of them (sha256 "
                            "compared)", tip="directory that must be identical on every box"),
        Param("max_restarts", INT, "with --torchrun: torchrun's own --max-restarts, its elastic agent restarting the "
                                   "workers on every node after a worker fails (default 0: a failed node ends the "
                                   "gang's attempt, and a run policy retries the gang as a whole)",
              tip="torchrun's own restarts of failed workers", low=0, high=100),
        Param("nnodes", TEXT, "with --torchrun: torchrun's elastic --nnodes MIN:MAX (the gang's box count between; "
                              "default: exactly the boxes given)", tip="elastic MIN:MAX nodes"),
    )),
    ("Run policy: retries, stalls, time limit, checkpoints", (
        *RUN_POLICY,
    )),
    ("The run outlives its box (--fleet --vault)", (
        *KEEPER,
    
    )),
    ("Output", (
        JSON,
        Param("timeout", SECS, "seconds the launch may take on the box", default=60, low=1, high=DAY,
              what="whole seconds",
              cli_only="a tool call's own limit applies"),
    )),
), tools=(
    Tool("job_launch", "launch", JOBS, RUNS, "Launch a detached job",
         "Start a command detached on a box (or as an engine's job); returns its id.", args=(
             HOST1, a("cmd"), a("script"), a("name"), a("labels", "label"), a("workdir"), a("gpus"), a("share_gpu"),
             *ENVS, a("key"),
             a("progress_regex"), a("profile"), a("engine"), RESOURCES,
             *(a(p.name + ("_s" if p.kind == SECS else ""), p.name) for p in RUN_POLICY if not p.cli_only))),
    Tool("fleet_launch", "launch", "fleet", RUNS, "Launch a job where it fits",
         "Launch a job on the least loaded fleet box with enough free matching GPUs.", args=(
             a("gpus", kind=INT, low=1, high=64, required=True, tip="how many GPUs the job needs on one box"),
             a("cmd", required=True), a("fleet"), a("gpu_type"), a("min_vram_gib"), a("name"), a("key"),
             a("workdir"), *ENVS, a("checkpoint_dir"), a("resume_arg"), *_KEPT)),
    Tool("gang_launch", "launch", "fleet", RUNS, "Launch torchrun across boxes",
         "Start one torchrun run across boxes after a gang preflight; returns the gang id.", findings=True,
         implied=("torchrun",),
         args=(
             a("cmd", required=True, tip="training script and arguments torchrun runs, e.g. 'train.py --lr 3e-4'"),
             a("hosts", "host", kind=CSV, tip="boxes; the first hosts the rendezvous"),
             a("fleet", tip="a [fleet.NAME] group: the gang's boxes, in its order; with vault, where a lost "
                            "node's replacement comes from"),
             a("nproc_per_node", default=1, low=GANG_NODES[0], high=GANG_NODES[1]),
             a("rdzv_port", default=29500, low=GANG_PORT[0], high=GANG_PORT[1]), a("rdzv_host"), a("code"),
             a("workdir"), a("name"), *ENVS, a("max_restarts"), a("nnodes"),
             *(a(p.name + ("_s" if p.kind == SECS else ""), p.name) for p in RUN_POLICY if not p.cli_only), *_KEPT)),
))

STATUS = Verb("status", "Jobs", READS, line="how each run is doing, from the box's records",
              examples=("gpuops status --host box", "gpuops status --host box --job train",
                        "gpuops status --gang GANG_ID"), word="job", params=(
    host(SEVERAL),
    IDENTITY,
    Param("job", TEXT, "one job: " + WHICH + " (default: list recent jobs). States: " + states.listing(),
          tip="one job (default: recent jobs)"),
    Param("label", PAIRS, "only jobs with this k=v label (repeatable)", tip="only jobs with these labels"),
    Param("progress_regex", TEXT, "regex for training-progress lines (group 1 = step), tried before the built-in ones",
          tip="regex for progress lines (group 1 = step)"),
    Param("stall_factor", NUM, "STALLED when no progress line for this many times the recent step time",
          tip="STALLED after this many step times", default=10, low=0, high=1000),
    Param("stall_min", SECS, "...and for at least this many seconds (without a known step time: the larger of this "
                             "and 1800)", tip="and at least this long (1800 without a step time)",
          default=600, low=0, high=30 * DAY),
    Param("limit", INT, "list at most this many jobs, newest first (0: all of them)", default=20, low=0, high=100000),
    Param("all", SWITCH, "a run is one row, its current attempt's: list its earlier attempts under it too, each in "
                         "the state it ended in", cli_only="job_status answers a run's row; each attempt's id names it"),
    Param("verbose", SWITCH, "under each row, why the job ended, how its run stands and what it runs now (default: "
                             "one row a run; --job ID shows one job in full)",
          cli_only="job_status answers every field; `fields` picks them"),
    JOBS_DIR,
    JSON,
    GANG,
    WATCH,
), tools=(
    Tool("job_status", "status", JOBS, READS, "Job states",
         "Job states: running, stalled, how it ended.", args=(
             KEPT_HOST, a("job"),
             a("limit", default=STATUS_ROWS, low=1, high=STATUS_ROWS_MAX, tip="jobs listed, newest first"),
             a("labels", "label"),
             a("progress_regex"), a("stall_factor"), a("stall_min_s", "stall_min"),
             a("fields", **_over(FIELDS, tip="keys of each job to return; ['*']: all")),
             a("failed_only", **_over(FAILED_ONLY, default=False, tip="only jobs whose state needs a look")))),
    Tool("gang_status", "status", "fleet", READS, "A gang's state",
         "A gang's state from its nodes: RUNNING only when all run.", args=(a("gang", required=True),)),
))

LOGS = Verb("logs", "Jobs", READS, line="a job's log: an exact page, or --follow",
            examples=("gpuops logs --host box --job train --follow", "gpuops logs -j train -f",
                      "gpuops logs --gang GANG_ID --follow"), word="job", params=(
    host(),
    IDENTITY,
    Param("job", TEXT, WHICH, tip=JOB_TIP),
    ATTEMPT,
    Param("tail", INT, "show the last N lines (default 100)", tip=TAIL_LINES, default=100, low=0, high=1000000),
    Param("follow", SWITCH, "keep streaming until the job ends; survives a dropped link by resuming at the last byte",
          cli_only="a call ends within a minute: job_wait waits, job_logs pages on from next_offset"),
    Param("from_offset", INT, "start at this byte offset (as returned in next_offset) instead of the tail",
          tip="from this byte (a next_offset), not the tail", low=0, high=2 ** 63 - 1,
          what="a byte offset"),
    Param("max_bytes", INT, "a page holds at most this many bytes (default: 64 KiB with --json, else 1 MiB); with "
                            "--json --follow, the text keeps the newest this many",
          tip="most bytes in the page", low=1, high=16 << 20),
    Param("timeout", SECS, "with --follow: stop following after this many seconds (exit 6, next_offset says where "
                           "to resume)", low=0, high=30 * DAY, cli_only="it bounds --follow, which no tool has"),
    Param("save", TEXT, "copy the whole log (and the job's records) to DIR/<job>/, resuming an earlier copy",
          cli_only="it writes this machine's disk: data_pull copies a job's directory, verified"),
    Param("reconnect", SECS, "seconds --follow keeps trying to reconnect after the link drops", default=120, low=0,
          high=DAY, cli_only="it bounds --follow, which no tool has"),
    JOBS_DIR,
    Param("json", SWITCH, "the page as one JSON envelope (control characters escaped); without it the log is "
                          "printed with its colours, and every other escape sequence shown escaped",
          cli_only=JSON.cli_only),
    Param("raw", SWITCH, "print the log's bytes exactly as the job wrote them, escape sequences included, as `cat` "
                         "would (the box chooses them: a sequence can clear or retitle your terminal)",
          cli_only="a tool's page is JSON: encoding base64 gives the exact bytes"),
    GANG,
    Param("cursors", TEXT, "with --gang: where each node's log goes on, NODE=OFFSET,... (the cursors a page or "
                           "follow printed)", tip="data.cursors of an earlier call"),
    Param("node", TEXT, "with a kept gang's run id (launch --torchrun --vault): node N's log (0: the head) of its "
                        "current attempt, or the node on box ALIAS; a lost box's last log is read from the vault",
          cli_only="a person reads the vault's copy on the keeper's machine; an agent's job_status names each "
                   "attempt's boxes"),
), tools=(
    Tool("job_logs", "logs", JOBS, READS, "Read a job's log",
         "A page of a job's log: its last lines or from a byte offset.", args=(
             HOST1, JOB, a("attempt"), a("tail", default=80, low=1, high=2000), a("from_offset"),
             a("max_bytes", default=PAGE, high=PAGE),
             a("encoding", kind=CHOICE, choices=("text", "base64"), default="text",
               why="the CLI prints the log's bytes as they are", tip="base64: exact bytes in data.bytes_b64"))),
    Tool("gang_logs", "logs", "fleet", READS, "Every node's log",
         "Every node's log at once, each line prefixed with its node.", args=(
             a("gang", required=True), a("tail", default=40, low=1, high=2000, tip="lines per node"), a("cursors"),
             a("max_bytes", default=8000, high=PAGE, tip="per node"))),
))

_AGAIN = "seconds at most; call again while timed_out"
WAIT = Verb("wait", "Jobs", READS, line="wait until a job reaches a state or a log line",
            examples=("gpuops wait --host box --job train --timeout 3600",
                      "gpuops wait --host box --job train --log-regex 'step 1000\\b' --timeout 600"), params=(
    host(),
    IDENTITY,
    Param("job", TEXT, WHICH, tip=JOB_TIP),
    Param("until", STATES, "'terminal' (default), 'event' (a run's next event) or states to wait for, "
                           "comma-separated: " + ", ".join(WAITABLE),
          tip="states to wait for (default: any end), or 'event': a run's next", default="terminal"),
    Param("after_event", INT, "with a run: its events after this seq come back, and --until event returns at the "
                              "first (default: those from now on)",
          tip="a run: events after this seq", low=0, high=2 ** 62, what="an event's seq"),
    Param("log_regex", TEXT, "also return as soon as a log line (after --from-offset) matches this regular expression",
          tip="or until a log line matches"),
    Param("from_offset", INT, "look for --log-regex from this byte offset (a next_offset); default 0, the log's start",
          tip="log_regex from this byte", low=0, high=2 ** 63 - 1, what="a byte offset"),
    Param("timeout", SECS, "seconds to wait at most (exit 6 when it passes first)", default=300, low=0, high=7 * DAY),
    Param("max_bytes", INT, "new_text holds at most this many bytes, the newest before next_offset (default 64 KiB)",
          tip="new_text's most bytes (the newest)", low=0, high=1 << 20),
    JOBS_DIR,
    JSON,
    Param("gang", TEXT, "a gang id (launch --torchrun prints it): until the whole gang reaches --until; --host is "
                        "not needed", tip=GANG.tip),
), tools=(
    Tool("job_wait", "wait", JOBS, READS, "Wait for a job",
         "Wait until a job reaches a state or its log matches.", args=(
             KEPT_HOST, JOB, a("until", default=None, items=WAITABLE + (EVENT,)), a("after_event"), a("log_regex"),
             a("from_offset"),
             a("timeout_s", "timeout", default=WAIT_S, high=WAIT_S, tip=_AGAIN),
             a("max_bytes", default=4000, high=PAGE), FIELDS)),
    Tool("job_events", "wait", JOBS, READS, "A run's events",
         "A run's events (attempts, retries, its end) after a seq, at once.", args=(
             HOST1, JOB, a("after_event", default=0))),
    Tool("gang_wait", "wait", "fleet", READS, "Wait for a gang",
         "Wait until a whole gang reaches a state, or can no longer.", args=(
             a("gang", required=True), a("until", default=None, items=WAITABLE),
             a("timeout_s", "timeout", default=WAIT_S, high=WAIT_S, tip=_AGAIN))),
))

_GRACE = Param("grace", SECS, "seconds between SIGTERM and SIGKILL", default=10, low=0, high=DAY,
               tip="seconds from SIGTERM to SIGKILL")
_GRACE_S = a("grace_s", "grace", high=GRACE_S)

STOP = Verb("stop", "Jobs", ENDS, line="stop a job's whole process tree (a dry run first)",
            examples=("gpuops stop --host box --job train", "gpuops stop --host box --job train --yes",
                      "gpuops stop --gang GANG_ID"), word="job", params=(
    host(),
    IDENTITY,
    Param("job", TEXT, WHICH, tip=JOB_TIP),
    _GRACE,
    *_yes("really send the signals (without it: show what would be signalled, and its plan id)"),
    Param("plan", TEXT, "with --yes: act only if the job's live processes are still those of this plan id (from a "
                        "dry run); else exit 5 with the new plan", tip=PLAN_TIP),
    Param("signal", TEXT, "Slurm: send this checkpoint signal first (e.g. USR1) and give the job up to --grace "
                          "seconds to end before scancel", cli_only="job_pause checkpoints a job before it stops it"),
    JOBS_DIR,
    JSON,
    GANG,
), tools=(
    Tool("job_stop", "stop", JOBS, ENDS, "Stop a job",
         "Stop a job's processes, or only plan it.", acts_when=("yes",), args=(
             KEPT_HOST, JOB, _GRACE_S, a("yes"), a("plan_id", "plan"))),
    Tool("gang_stop", "stop", "fleet", ENDS, "Stop every node of a gang",
         "Stop every node of a gang, or only plan it.", acts_when=("yes",), args=(
             a("gang", required=True), _GRACE_S, a("yes"), a("plan_id", "plan"))),
))

_PAUSED = "the job: its id, --key, --name or Slurm job id"
_RESUME_ARG = "text appended to its command, e.g. '--resume last.ckpt'"

PAUSE = Verb("pause", "Jobs", ENDS, line="checkpoint a job and give its resources back",
             examples=("gpuops pause --host login --job train --ckpt-regex 'saved checkpoint'",), word="job", params=(
    host(HOST_WORDS + " (a Slurm job: its login node)", default="local"),
    IDENTITY,
    Param("job", TEXT, _PAUSED, tip=JOB_TIP),
    Param("ckpt_regex", TEXT, "a log line the job prints once its checkpoint is written (a regular expression)",
          tip="regex of the log line saying the checkpoint is written"),
    Param("ckpt_file", TEXT, "a file the job writes (or rewrites) once its checkpoint is written",
          tip="a file written once the checkpoint is"),
    Param("signal", TEXT, "the checkpoint signal (default: the job's --signal, else USR1)",
          tip="the checkpoint signal (default: the job's own, else USR1)"),
    Param("timeout", SECS, "seconds to wait for the checkpoint marker; without it nothing is stopped (exit 6)",
          default=300, low=1, high=DAY),
    Param("grace", SECS, "a supervised job: seconds between SIGTERM and SIGKILL once the checkpoint is written",
          default=10, low=0, high=DAY, tip=_GRACE.tip),
    JOBS_DIR,
    JSON,
), tools=(
    Tool("job_pause", "pause", JOBS, ENDS, "Checkpoint and pause a job",
         "Checkpoint a job and give its GPUs back; job_resume continues it.", args=(
             HOST1, JOB, a("ckpt_regex"), a("ckpt_file"), a("signal"),
             a("timeout_s", "timeout", default=CALL_S, high=CALL_S,
               tip="wait this long for the checkpoint, else stop nothing"),
             _GRACE_S)),
))

RESUME = Verb("resume", "Jobs", RUNS, line="continue a paused job from its checkpoint",
              examples=("gpuops resume --host login --job train",
                        "gpuops resume --host box --job train --resume-arg '--resume last.pt'"), word="job", params=(
    host(HOST_WORDS + " (a Slurm job: its login node)", default="local"),
    IDENTITY,
    Param("job", TEXT, _PAUSED, tip=JOB_TIP),
    Param("resume_arg", TEXT, "a supervised job: text appended to its command for the new run, e.g. '--resume "
                              "last.ckpt' (a Slurm job restarts its own script, which finds the checkpoint)",
          tip=_RESUME_ARG),
    Param("env", PAIRS, "a supervised job: KEY=VALUE for the new run (repeatable)",
          tip="environment for the new run (not secrets)"),
    Param("secret_env", LIST, "a supervised job: NAME of a local variable passed through stdin only (repeatable)",
          tip=SECRET_ENV.tip),
    Param("key", TEXT, "a supervised job: idempotency key for the new run"),
    JOBS_DIR,
    JSON,
), tools=(
    Tool("job_resume", "resume", JOBS, RUNS, "Resume a paused job",
         "Continue a paused job from its checkpoint.", args=(
             HOST1, JOB, a("resume_arg"), *ENVS, a("key"))),
))

RETRY = Verb("retry", "Jobs", RUNS, line="start a job again from its immutable command", engine_flags=True,
             examples=("gpuops retry --host box --job train --resume-arg '--resume last.pt'",), params=(
    host(),
    IDENTITY,
    Param("job", TEXT, "the job to retry: " + WHICH, tip="the job to run again: its id, idempotency key or name"),
    Param("env", PAIRS, ENV.help + "; overrides the parent's", tip=ENV.tip),
    SECRET_ENV,
    Param("resume_arg", TEXT, "text appended to the command (or extra script arguments), e.g. '--resume last.ckpt'; "
                              "with {checkpoint}, the newest complete checkpoint's path goes there, quoted",
          tip="appended to its command; {checkpoint}: newest checkpoint"),
    Param("checkpoint_dir", TEXT, "with --resume-arg '... {checkpoint}': DIR[:GLOB] of the checkpoints (default: its "
                                  "run's)", tip="DIR[:GLOB] for {checkpoint} (default: the run's)"),
    Param("key", TEXT, "idempotency key for the retry itself"),
    JOBS_DIR,
    JSON,
    GANG,
), tools=(
    Tool("job_retry", "retry", JOBS, RUNS, "Run a job's command again",
         "Run a job's command again as its child job.", args=(
             HOST1, a("job", required=True), a("resume_arg"), a("checkpoint_dir"), a("key"), *ENVS, RESOURCES)),
    Tool("gang_retry", "retry", "fleet", RUNS, "Launch a gang again",
         "Launch a gang again (a new id, its parent named) once none of its nodes runs.", findings=True, args=(
             a("gang", required=True), a("resume_arg"), *ENVS)),
))

QUEUE = Verb("queue", "Jobs", RUNS, line="run a file of jobs one after another", engine_flags=True,
             examples=("gpuops queue --host box --file runs.txt", "gpuops queue --host box --name runs"), params=(
    host(SEVERAL, default="local"),
    IDENTITY,
    Param("file", TEXT, "local file: one command per line (# comments and blank lines skipped); re-run with more "
                        "lines appended to extend a running queue, or unchanged to resume it",
          cli_only="a tool call gives the lines themselves, as commands"),
    Param("name", TEXT, "queue name on the box (default: from the file name)", tip="queue name on the box"),
    Param("env", PAIRS, ENV.help + ", for every entry", tip=ENV.tip),
    SECRET_ENV,
    Param("workdir", TEXT, "directory on the box every entry runs in", tip="directory on the box"),
    Param("gpus", TEXT, "CUDA_VISIBLE_DEVICES for every entry", tip="CUDA_VISIBLE_DEVICES"),
    Param("wait", SECS, "wait up to this many seconds for the queue to finish", default=0, low=0, high=7 * DAY,
          tip="wait this long for it to end"),
    Param("cancel", SWITCH, "start no further entries (the running one keeps running: stop it with `gpuops stop`)",
          tip="start no more entries (the running one runs on)"),
    JOBS_DIR,
    JSON,
    Param("engine", CHOICE, ENGINE.help + "; an engine that chains the entries itself (Slurm: --dependency=afterany) "
                                          "starts each after the one before it ended", tip=ENGINE.tip,
          choices=ENGINE.choices),
), tools=(
    Tool("job_queue", "queue", JOBS, RUNS, "A sequential run queue",
         "A run queue on a box: each command a job, one after another.",
         acts_when=("commands", "cancel"), args=(
             HOST1, a("name", required=True),
             a("commands", kind=LIST, why="the CLI reads them from a local file (--file)",
               tip="commands run in turn (again, more appended: extend it); omit: show it"),
             a("cancel"), a("wait_s", "wait", high=CALL_S), a("workdir"), a("gpus"), *ENVS, a("engine"), RESOURCES)),
))

VERBS = (LAUNCH, STATUS, WAIT, LOGS, STOP, PAUSE, RESUME, RETRY, QUEUE)
