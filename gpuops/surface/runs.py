"""A run's own parameters, which launch takes: its policy (what the supervisor on the box retries,
stops and keeps) and its keeper (what outlives the box)."""

from .common import DAY
from .model import INT, LIST, NUM, SECS, SWITCH, TEXT, Param

# A run: one supervisor on the box starts, watches and judges each attempt (gpuops.onbox.run.runloop);
# gpuops.jobs.runpolicy checks these before anything is sent.
RUN_POLICY = (
    Param("max_retries", INT, "attempts after the first when one fails for a transient reason (preemption, a lost "
                              "node or peer, an NCCL timeout, a GPU fault, a stall gpuops killed, a kill without "
                              "OOM); default 0", tip="retries of a transient failure", low=0, high=100),
    Param("retry_on", TEXT, "failure classes to retry, comma-separated, instead of the transient ones ('default' adds "
                            "them): triage's class names, e.g. python-exception",
          tip="classes to retry ('default': transient)"),
    Param("checkpoint_dir", TEXT, "DIR[:GLOB] where the job writes checkpoints (relative to --workdir): each retry "
                                  "resumes from the newest complete one. Its checkpoints are the names the "
                                  "libraries write (checkpoint-N, global_stepN, iter_NNNNNNN, epoch=E-step=S.ckpt, "
                                  "ckpt-N, step_N ...), or what GLOB matches; nothing else in DIR is ever resumed "
                                  "from or deleted",
          tip="DIR[:GLOB] resumed from"),
    Param("checkpoint_glob", TEXT, "the names in --checkpoint-dir that are checkpoints (e.g. 'model_*.pt'), instead "
                                   "of the names the libraries write; the same as DIR:GLOB",
          cli_only="checkpoint_dir takes DIR:GLOB"),
    Param("resume_arg", TEXT, "added to the command of each attempt that resumes: ARGS with {checkpoint}, e.g. "
                              "'--resume {checkpoint}', where the command holds {checkpoint}, else at its end "
                              "(refused when the end is a comment or after a pipe, ';' or '&&'); without it a "
                              "{checkpoint} in the command is the path, and the job can read $GPUOPS_RESUME_FROM",
          tip="on resuming, e.g. '--resume {checkpoint}'"),
    Param("stall_after", SECS, "no progress line for this long (90, 15s, 10m): capture stacks and state, stop the "
                               "attempt, retry it as a hang", tip="no progress this long: stop, retry",
          low=1, high=366 * DAY),
    Param("max_runtime", SECS, "the whole run's limit, retries included (4h, 1h30m): then TIMEOUT, never retried",
          tip="whole run's limit: then TIMEOUT", low=1, high=366 * DAY),
    Param("keep_checkpoints", INT, "keep the K newest complete checkpoints, delete older ones (never the newest "
                                   "complete nor the best; nothing while which to delete is ambiguous), and warn "
                                   "when the disk cannot hold the next",
          tip="keep K newest checkpoints", low=1, high=100000),
    Param("keep_best", TEXT, "with --keep-checkpoints: a GLOB of checkpoint names never deleted (besides HF's "
                             "best_model_checkpoint, Lightning's best_model_path and best* names, always kept)",
          tip="glob never pruned"),
    Param("share_checkpoint_dir", SWITCH, "let this run use a checkpoint directory another live run uses (refused "
                                          "otherwise: each would resume from and prune the other's checkpoints)",
          cli_only="a person's call: an agent's run gets a checkpoint directory of its own"),
    Param("notify", TEXT, "a command run on the box for each event (retrying, stalled, resumed, completed, gave up, "
                          "disk low), the event as JSON on its stdin, e.g. 'curl -d @- https://ntfy.sh/TOPIC'",
          cli_only="a person's alert: an agent hears each event from job_wait until event"),
)


# The run outlives the box (gpuops.keeper): with --fleet, a keeper (here, or on --keeper-host) copies each complete
# checkpoint into the vault and moves the run to another box of the fleet when its box is lost.
_KEEPER_CLI = "the keeper is a detached process on the machine that runs the CLI"
KEEPER = (
    Param("vault", TEXT, "with --fleet: a directory here, or HOST:DIR on an always-on host over SSH (a local path "
                         "with ':' is written ./a:b), that keeps the run's complete checkpoints (verified copies), "
                         "log and events; a keeper process then moves the run to another box of the fleet when its box "
                         "is lost, resuming from the vault (needs --checkpoint-dir and --resume-arg)",
          tip="with fleet: a local directory (under the roots) or HOST:DIR keeping the run's checkpoints; a keeper "
              "moves a lost box's run to another box of the fleet"),
    Param("lost_after", SECS, "with --vault: a box silent this long is lost (default 3m; a shorter blip is waited out)",
          low=1, high=DAY, tip="with vault: a box silent this long is lost (default 180 s; a shorter blip is waited out)"),
    Param("stop_when_done", SWITCH, "with --vault: once the run completed and its final checkpoint and --output paths "
                                    "are verified in the vault, run the box's stop command from the fleet file "
                                    "(stop = \"...\"); a failing stop is reported, never done",
          tip="with vault: once completed and in the vault, run the box's stop command from the fleet file"),
    Param("output", LIST, "with --vault: a path on the box (relative to --workdir) the run leaves behind, copied to the "
                          "vault before the run counts as done (repeatable)", cli_only=_KEEPER_CLI),
    Param("budget", NUM, "with --vault: USD the run may spend (the fleet file's prices, by the ledger); when reached, "
                         "what the box holds is copied to the vault, the run stopped and its boxes' stop commands run",
          low=0.0001, high=1e6, what="USD", tip="with vault: USD the run may spend; then evacuated and stopped"),
    Param("stop_idle", SECS, "with --vault: once the run completed and is in the vault, run the stop command of each "
                             "of its boxes that stays idle this long (no gpuops job, no GPU in use); a box busy "
                             "again is left running", low=1, high=366 * DAY,
          tip="with vault: once completed and in the vault, stop each box idle this long"),
    Param("keeper_host", TEXT, "with --vault HOST:DIR: run the keeper on this always-on host (an ssh_config alias "
                               "or user@host:port) instead of here; it needs the same gpuops and SSH reach to every "
                               "box of the fleet and the vault host, both checked before anything starts",
          tip="with vault HOST:DIR: an always-on host to run the keeper on (same gpuops, reaches every box)"),
)
