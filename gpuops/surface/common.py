"""Parameters several verbs share, and the words each side uses for them."""

from .model import INT, LIST, PAIRS, SWITCH, TEXT, Param, a

DAY = 86400
WAIT_S = 45.0      # one MCP call that waits: clients give up near 60 s, so a longer wait is several calls
CALL_S = 40.0      # on-box work within one MCP call, leaving room for the SSH connect
PAGE = 24_000      # log bytes in one MCP answer, of the ~40k characters a result may take
GRACE_S = 30.0     # SIGTERM to SIGKILL within one MCP call

HOST_WORDS = "'local' (default), an ssh_config alias or user@host:port"
HOST_TIP = "'local', ssh alias or user@host:port"
SEVERAL = HOST_WORDS + "; comma-separate several"


def host(help=HOST_WORDS, default=None, **more):
    return Param("host", TEXT, help, tip=HOST_TIP, default=default, **more)


IDENTITY = Param("identity", TEXT, "SSH private key file to use",
                 cli_only="the server's ssh_config and agent pick the key")
JSON = Param("json", SWITCH, "print one JSON envelope instead of tables",
             cli_only="every tool answers with the envelope")
JOBS_DIR = Param("jobs_dir", TEXT, "job records directory on the box (default: $GPUOPS_JOBS_DIR there, else "
                                   "~/.gpuops/jobs)",
                 cli_only="a tool uses the box's own ($GPUOPS_JOBS_DIR there, else ~/.gpuops/jobs)")
VERBOSE = Param("verbose", SWITCH, "each finding in full: its evidence and fix (default: one line per finding)",
                cli_only="how a table is drawn for people", shows="verbose")
ALL = Param("all", SWITCH, "as --verbose, and list every passing check on its own line, even when that takes "
                           "more than a screen", cli_only="how a table is drawn for people", shows="show_all")
WATCH = Param("watch", SWITCH, "redraw the table in place, asking again each second, until Ctrl-C (then print "
                               "the last one)", cli_only="a table redrawn for people; a tool answers once")
WHICH = "the job's id or a unique part of it, its --key or its --name"
JOB_TIP = "job id, idempotency key or name"
# A run's attempt by its number (gpuops.onbox.host.jobrecord.attempt_of): the first attempt's id is the
# run's, so without it attempt 1's log and diagnosis cannot be named.
ATTEMPT = Param("attempt", INT, "with --job naming a run: its attempt N (1: the first, whose id is the run's), "
                                "not the run's current attempt", low=1, high=101, what="an attempt number",
                tip="a run's attempt N (1: its first)")
GANG = Param("gang", TEXT, "a gang id (launch --torchrun prints it): every node at once; --host is not needed",
             tip="the gang id gang_launch returned")
ENV = Param("env", PAIRS, "KEY=VALUE set in the job's environment (repeatable)",
            tip="environment for the job (not secrets)")
SECRET_ENV = Param("secret_env", LIST,
                   "NAME of a variable in YOUR local environment whose value is passed to the job through stdin "
                   "only: never in argv, files or output (repeatable)",
                   tip="env names GPUOPS_MCP_SECRETS allows; by stdin")
YES_PLAN_TIP = "false: only plan it (a plan_id); true: apply the plan"
PLAN_TIP = "with yes: the plan_id shown (refused with a new plan if things changed)"
LABEL = Param("label", PAIRS, "k=v label, for filtering with status --label (repeatable)",
              tip="labels k: v, for filtering job_status")
EXCLUDE = Param("exclude", LIST, "gitignore-style pattern to leave out (repeatable; added after the source's "
                                 ".gpuopsignore)", tip="gitignore-style patterns to leave out")
INCLUDE_GIT = Param("include_git", SWITCH, "also send .git directories (left out by default)")
REHASH = Param("rehash", SWITCH, "read and hash every file on both ends, ignoring the digest caches (which skip "
                                 "files whose size, mtime, ctime, inode and device are all unchanged)",
               tip="hash every file again, ignoring the digest caches")

# the Args most job tools take, under their MCP names
HOST1 = a("host", required=True)
JOB = a("job", tip=JOB_TIP, required=True)
ENVS = (a("env"), a("secret_env"))

# what a large answer holds (gpuops.mcp.trim): compact unless asked for more
FIELDS = a("fields", kind=LIST, why="a table for people shows what fits; a model asks for the keys it needs",
           tip="data keys to return; ['*']: all")
FAILED_ONLY = a("failed_only", kind=SWITCH, default=True, why="a table for people shows every row",
                tip="only what is not fine")
