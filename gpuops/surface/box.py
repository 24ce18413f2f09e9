"""The box verbs: preflight, fleet, reap, diagnose, triage, profiles, gotcha, disconnect, and their
tools."""

from .common import (ALL, ATTEMPT, DAY, FAILED_ONLY, FIELDS, GANG, HOST1, HOST_TIP, IDENTITY, JOB, JOBS_DIR, JSON, PLAN_TIP,
                     SEVERAL, VERBOSE, YES_PLAN_TIP, host)
from .model import CHOICE, CSV, ENDS, INT, LIST, READS, SECS, SWITCH, TEXT, Param, Tool, Verb, a

CALLS_OWN_LIMIT = "a tool call's own limit applies"
PROFILE_TIP = "platform profile (see profiles_show)"

PREFLIGHT = Verb("preflight", "Check", READS, line="will this box hurt my run? one SSH round trip",
                 examples=("gpuops preflight", "gpuops preflight --host box --json"), params=(
    host(SEVERAL, default="local"),
    IDENTITY,
    JSON,
    Param("profile", TEXT, "platform profile whose paths and thresholds apply (see `gpuops profiles`)",
          tip=PROFILE_TIP),
    Param("path", LIST, "extra directory whose free bytes and inodes to check (repeatable); DIR:SIZE (e.g. "
                        "/data/ckpt:200G) sets the free space it needs, else a 1 GiB floor applies",
          tip="dirs the run writes to (free space, inodes); DIR:SIZE needs SIZE free (/data:500G)"),
    Param("qualify", SWITCH, "measure the box for about a minute against its GPU's datasheet (matmul per dtype, "
                             "memory, host and peer copies, all-reduce, the run's paths' read and write): keep or "
                             "return it; the verdict is kept for fleet and placement",
          cli_only="a minute of measuring on the box; a tool call keeps to the one round trip"),
    Param("timeout", SECS, "seconds the on-box probe may run before it is killed on the box", default=60, low=1,
          high=DAY, what="whole seconds", cli_only=CALLS_OWN_LIMIT),
    ALL,
    VERBOSE,
), tools=(
    Tool("host_preflight", "preflight", "check", READS, "Preflight a GPU box",
         "Check a GPU box before a run: what fails, each with its fix.", findings=True, args=(
             HOST1, a("profile"), a("paths", "path"), FIELDS, FAILED_ONLY)),
))

FLEET = Verb("fleet", "Check", READS, line="every box at once: GPUs, jobs, disk, idle cost",
             examples=("gpuops fleet", "gpuops fleet --host a,b,c --json", "gpuops fleet --fleet train --watch"),
             params=(
    host("boxes to ask, comma-separated (an ssh_config alias or user@host:port each); a box the fleet file lists "
         "keeps its price and profile"),
    Param("fleet", TEXT, "a [fleet.NAME] group of ~/.config/gpuops/fleet.toml, or a fleet file of its own (default: "
                         "every [[host]] of that file)", tip="a [fleet.NAME] group of the server's fleet file"),
    IDENTITY,
    Param("window", SECS, "seconds over which GPU utilisation is sampled; any use means busy (default 2)",
          tip="seconds GPU use is sampled over", default=2, low=0, high=60),
    Param("watch", SWITCH, "redraw the table in place, with a row per GPU (utilisation and memory bars, its "
                           "processes), asking again after each round, until Ctrl-C (then print the last one)",
          cli_only="a table redrawn for people; a tool answers once"),
    Param("json", SWITCH, "print one JSON envelope instead of the table", cli_only=JSON.cli_only),
), tools=(
    Tool("fleet_status", "fleet", "fleet", READS, "All boxes at once, idle money",
         "Every rented box at once: GPUs, VRAM, jobs, disk, and what idle time cost.", args=(
             a("hosts", "host", kind=CSV, tip="boxes to ask (default: the server's fleet file)"), a("fleet"),
             a("window_s", "window", low=0.5, high=10))),
))

REAP = Verb("reap", "Post-mortem", ENDS, line="free GPU memory held by orphans (a dry run first)",
            examples=("gpuops reap --host box", "gpuops reap --host box --yes"), params=(
    host(SEVERAL, default="local"),
    IDENTITY,
    Param("gpu", INT, "only holders of this GPU index", low=0, high=1023, what="a GPU index"),
    Param("min_age", SECS, "seconds a holder must have run before it counts as idle or orphaned (default 600)",
          tip="a holder younger than this is never reaped", default=600, low=0, high=366 * DAY),
    Param("idle_window", SECS, "seconds over which GPU utilisation and each holder's own CPU and I/O are sampled; "
                               "any GPU use, or more than a trickle of CPU or I/O, means busy (default 10)",
          tip="seconds of GPU use watched to call a holder idle", default=10, low=0, high=3600),
    Param("term_wait", SECS, "seconds between SIGTERM and SIGKILL (default 10)", default=10, low=0, high=DAY,
          tip="seconds from SIGTERM to SIGKILL"),
    Param("yes", SWITCH, "signal the reapable holders (without it: print the plan, change nothing, exit 5 if any)",
          tip=YES_PLAN_TIP),
    Param("plan", TEXT, "with --yes: reap only if the reapable set is still this plan id's (from a dry run's "
                        "data.plan); else exit 5 with the new plan", tip=PLAN_TIP),
    JSON,
    ALL,
    VERBOSE,
), tools=(
    Tool("vram_reap", "reap", "postmortem", ENDS, "Reap GPU memory holders",
         "Free GPU memory held by orphaned or idle processes, or only plan it.", findings=True,
         acts_when=("yes",), args=(
             HOST1, a("gpu"), a("yes"), a("plan_id", "plan"), a("min_age_s", "min_age"),
             a("idle_window_s", "idle_window", high=10), a("term_wait_s", "term_wait", high=10))),
))

DIAGNOSE = Verb("diagnose", "Post-mortem", READS, line="why did my run stop? the evidence, the next step",
                examples=("gpuops diagnose --host box --job train", "gpuops diagnose --gang GANG_ID"),
                word="job", params=(
    host(),
    IDENTITY,
    Param("job", TEXT, "a gpuops job id, --key or --name", tip=JOB.tip),
    ATTEMPT,
    Param("pid", INT, "a process gpuops did not launch (lower confidence: no launch records)", low=1, high=1 << 22,
          what="a process id", cli_only="a tool diagnoses gpuops jobs, from their records"),
    Param("since", TEXT, "with --pid: when it started (epoch seconds or ISO time); evidence before this is ignored",
          cli_only="it goes with --pid"),
    JOBS_DIR,
    JSON,
    Param("timeout", SECS, "seconds the on-box evidence gathering may run", default=60, low=1, high=DAY,
          what="whole seconds", cli_only=CALLS_OWN_LIMIT),
    Param("gang", TEXT, "a gang id (launch --torchrun prints it): names the node that failed first, and why",
          tip=GANG.tip),
), tools=(
    Tool("job_diagnose", "diagnose", "postmortem", READS, "Why a job stopped",
         "Why a job stopped (OOM kill, reboot, Xid, disk full, its exit), with evidence.",
         args=(HOST1, JOB, a("attempt"))),
    Tool("gang_diagnose", "diagnose", "fleet", READS, "Why a gang stopped",
         "Why a gang stopped: the node that failed first, and its verdict.", args=(a("gang", required=True),)),
))

_LOCAL_ONLY = "a tool triages a job, or a log file under the server's roots"
TRIAGE = Verb("triage", "Post-mortem", READS, line="read a training log: status, failure, progress",
              examples=("gpuops triage --log train.log", "gpuops triage --host box --job train"), params=(
    Param("log", TEXT, "the job's log file", tip="a log file on this machine (under GPUOPS_MCP_ROOTS)"),
    Param("dir", TEXT, "a job directory (its `log` link, else the sibling <dir>.log)", cli_only=_LOCAL_ONLY),
    Param("slurm_id", TEXT, "a Slurm job id, looked up as <outputs>/<id>-*/log or <outputs>/<id>-*.log",
          cli_only=_LOCAL_ONLY),
    Param("outputs", TEXT, "the outputs folder that --slurm-id looks in (default ./outputs)", default="outputs",
          cli_only=_LOCAL_ONLY),
    Param("host", TEXT, "with --job: the box the gpuops job ran on ('local' or an ssh_config alias / "
                        "user@host:port)", tip="with job: the box it ran on (default 'local')"),
    Param("job", TEXT, "a gpuops job (its id, --key or --name): reads a bounded head and tail of its log on --host",
          tip="a gpuops job: triage its log on host"),
    ATTEMPT,
    Param("jobs_dir", TEXT, "with --job: " + JOBS_DIR.help, cli_only=JOBS_DIR.cli_only),
    Param("profile", TEXT, "with --job: the platform profile the job was launched with (its job directory applies)",
          cli_only="a tool finds the job by its records"),
    IDENTITY,
    Param("slurm_state", TEXT, "the job's scheduler state (RUNNING, CANCELLED, ...); default: scontrol when on PATH, "
                               "else unknown", cli_only="a tool asks the job's records and scheduler"),
    Param("now", TEXT, "the time to judge progress against, ISO 8601 (default: now), so a triage can be repeated",
          cli_only="a tool judges progress against now"),
    Param("json", SWITCH, "print one JSON envelope instead of the markdown report", cli_only=JSON.cli_only),
    Param("format", CHOICE, "the report as 'rich' (doctor-style like every verb's, the default) or 'md' (Markdown, "
                            "for a ticket or a chat)", choices=("rich", "md"), cli_only="how a report is drawn"),
    Param("verbose", SWITCH, "what happened, the progress in full, each finding's evidence and all the advice",
          cli_only=VERBOSE.cli_only),
), tools=(
    Tool("log_triage", "triage", "postmortem", READS, "Triage a job log",
         "Classify a job's log: failure class, evidence lines, progress, advice.", findings=True, args=(
             a("path", "log"), a("job"), a("host"), a("attempt"))),
))

PROFILES = Verb("profiles", "Check", READS, line="platform profiles: what a stop button destroys",
                examples=("gpuops profiles", "gpuops profiles autodl", "gpuops profiles --guess --host box"),
                word="name", op="gpuops.ops.catalog:profiles", render="gpuops.render.catalog:render_profiles",
                doc="List platform profiles, show one, or guess which one a box is on.", params=(
    Param("name", TEXT, "show one profile in full (default: list them all)", tip="one profile in full (default: "
                                                                                "list them)"),
    Param("host", TEXT, "guess the platform of this box from its hostname, mounts and env names (reported, never "
                        "applied)", tip=HOST_TIP + " (one host)"),
    Param("identity", TEXT, "SSH private key file to use with --host", cli_only=IDENTITY.cli_only),
    JSON,
), tools=(
    Tool("profiles_show", "profiles", "reference", READS, "Platform profiles",
         "Platform profiles: paths, what the meter-stop deletes, detach method, thresholds.", local=True,
         args=(a("name"),), data="profiles:a deleted_by_meter_stop:a gotcha_titles:o gpuops.profiles.Profile"),
    Tool("profile_guess", "profiles", "reference", READS, "Guess a box's platform",
         "Which platform profile a box resembles (a guess, never applied).", args=(a("host", required=True),),
         data="guess:s? candidates:a facts:o", typed=("guess",)),
))

GOTCHA = Verb("gotcha", "Reference", READS, line="the catalog of rented-GPU traps",
              examples=("gpuops gotcha inode", "gpuops gotcha U7"), word="query", words=True,
              op="gpuops.ops.catalog:find_gotchas", render="gpuops.render.catalog:render_gotchas",
              doc="Look up a gotcha: what you see, why, the fix, and how gpuops checks or prevents it.", params=(
    Param("query", TEXT, "a gotcha id (U7, AD4, RP3) or keywords (inode, xid, crlf, stdin, zombie …)",
          tip="a gotcha id (U7, AD4) or keywords (inode, xid, zombie)"),
    Param("limit", INT, "at most this many entries (default 5)", tip="gotchas returned at most, best match first",
          default=5, low=1, high=1000),
    Param("json", SWITCH, "print one JSON envelope instead of text", cli_only=JSON.cli_only),
), tools=(
    Tool("gotcha_lookup", "gotcha", "reference", READS, "Look up a gotcha",
         "Look up a known GPU-box gotcha: what you see, why, the fix, how gpuops checks it.", local=True,
         args=(a("query", required=True), a("limit", high=20)), data="query:s total:i hits:a", typed=("hits",)),
))

DISCONNECT = Verb("disconnect", "Connections", READS, line="close the SSH connections kept between calls",
                  examples=("gpuops disconnect", "gpuops disconnect --host box"), connects=False,
                  op="gpuops.ops.disconnect:disconnect", render="gpuops.render.plain:summary",
                  doc="Close the SSH master connections kept between calls (all of them, or one box's).", params=(
    host("close only this box's connection (an ssh_config alias or user@host:port; comma-separate several)"),
    Param("identity", TEXT, "the SSH private key file the connection was opened with"),
    Param("json", SWITCH, "print one JSON envelope instead of text"),
), cli_only="the SSH connections a person's shell keeps between calls; the server's end with it")

VERBS = (PREFLIGHT, FLEET, PROFILES, DIAGNOSE, TRIAGE, REAP, GOTCHA, DISCONNECT)
