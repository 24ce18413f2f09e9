"""The data verbs: push, pull, verify; and the server's own request tools, which wait on them."""

from .common import (ALL, DAY, EXCLUDE, HOST1, IDENTITY, INCLUDE_GIT, JSON, PLAN_TIP, REHASH, VERBOSE, WAIT_S,
                     host)
from .model import CHANGES, CHOICE, READS, SECS, SWITCH, TEXT, Param, Tool, Verb, a

DATA = "data"
_HOST = "an ssh_config alias or user@host:port (push and verify: comma-separate several)"
_LOCAL = "under the directories the server reads (GPUOPS_MCP_ROOTS)"
_ENGINE_ONLY = "a tool lets gpuops pick (rsync when both ends have it, else SFTP)"
_RETRIES = "a tool keeps the CLI's default"
WAIT = a("wait_s", kind=SECS, default=20.0, low=0, high=WAIT_S,
         why="the CLI shows its progress until the copy ends; a tool call answers within a minute",
         tip="answer within this long: the result, or a request_id to request_wait on")
JSON_SYNC = Param("json", SWITCH, "print one JSON envelope instead of a progress bar and tables",
                  cli_only=JSON.cli_only)


def _transfer(src, dst):
    return (
        host(_HOST),
        Param("src", TEXT, src[0], tip=src[1]),
        Param("dst", TEXT, dst[0], tip=dst[1]),
        EXCLUDE,
        INCLUDE_GIT,
        Param("delete", SWITCH, "remove paths that exist only at the destination (listed only, unless --yes)",
              tip="remove paths that exist only at the destination: listed, with a plan_id, unless yes"),
        Param("yes", SWITCH, "with --delete: really delete", tip="with delete: really delete"),
    )


_TUNING = (
    Param("engine", CHOICE, "auto (rsync when both ends have it, else SFTP), rsync or sftp", default="auto",
          choices=("auto", "rsync", "sftp"), cli_only=_ENGINE_ONLY),
    Param("no_budget", SWITCH, "send even when the payload does not fit the destination's free bytes/inodes"),
    Param("io_timeout", SECS, "seconds without data movement before a transfer counts as stalled and is retried",
          default=30, low=1, high=DAY, what="whole seconds", cli_only=_RETRIES),
    Param("retry_for", SECS, "seconds to keep retrying a failing connection before giving up", default=300, low=0,
          high=DAY, cli_only=_RETRIES),
)
_PLAN = Param("plan", TEXT, "with --delete --yes: delete only the paths of this plan id (from the dry run's "
                            "sync.would-delete finding); when they changed, delete nothing and exit 5 with the new "
                            "plan", tip=PLAN_TIP)
_COMPRESS = Param("compress", SWITCH, "compress the data on the wire (rsync --compress): pays on a slow link with "
                                      "data that compresses; a transfer that saw one says so (sync.slow-link)",
                  tip="compress on the wire (pays on a slow link)")
_LAST = (REHASH, IDENTITY, _PLAN, _COMPRESS, JSON_SYNC, VERBOSE)
_COPY = (a("exclude"), a("include_git"), a("delete"), a("yes"), a("plan_id", "plan"), a("no_budget"), a("compress"),
         a("rehash"), WAIT)

PUSH = Verb("push", "Data", CHANGES, line="send a tree to the box and prove it arrived",
            resumable=True, examples=("gpuops push --host box --src ./data --dst /root/autodl-tmp/data",), params=(
    *_transfer(("local directory to send", f"local directory to send, {_LOCAL}"),
               ("directory on the box (created if missing)", "directory on the box (created if missing)")),
    Param("fix_crlf", SWITCH, "convert shell scripts with CRLF line endings to LF before sending",
          tip="convert shell scripts with CRLF line endings to LF first"),
    *_TUNING,
    Param("profile", TEXT, "platform profile: warn when --dst is deleted by the platform's stop",
          tip="platform profile: warn when remote is deleted by its stop"),
    *_LAST,
), tools=(
    Tool("data_push", "push", DATA, CHANGES, "Send a directory, verified",
         "Send a local directory to a box, resuming after drops, and prove it arrived (sha256).", findings=True, args=(
             HOST1, a("local", "src", required=True), a("remote", "dst", required=True), *_COPY,
             a("fix_crlf"), a("profile")), dangerous=("delete",)),
))
PULL = Verb("pull", "Data", CHANGES, line="fetch a tree from the box, verified and recorded",
            resumable=True, examples=("gpuops pull --host box --src /root/autodl-tmp/ckpt --dst ./ckpt",), params=(
    *_transfer(("directory on the box to fetch", "directory on the box to fetch"),
               ("local directory (created if missing)", f"local directory to write (created if missing), "
                                                        f"{_LOCAL}")),
    *_TUNING,
    *_LAST,
), tools=(
    Tool("data_pull", "pull", DATA, CHANGES, "Fetch a directory, verified",
         "Fetch a directory from a box, verify it, and record the verified pull for teardown_check.", findings=True,
         args=(
             HOST1, a("remote", "src", required=True), a("local", "dst", required=True), *_COPY),
         dangerous=("delete",)),
))
VERIFY = Verb("verify", "Data", READS, line="compare a local tree with the box's by sha256",
              resumable=True, examples=("gpuops verify --host box --src ./data --dst /root/autodl-tmp/data",), params=(
    host(_HOST),
    Param("src", TEXT, "local directory, the reference (as push's --src)",
          tip=f"local file or directory, {_LOCAL}"),
    Param("dst", TEXT, "directory on the box to compare with it (as push's --dst)", tip="path on the box"),
    EXCLUDE,
    INCLUDE_GIT,
    REHASH,
    IDENTITY,
    JSON_SYNC,
    ALL,
    VERBOSE,
    Param("local", TEXT, "old name of --src, still taken", cli_only="an old name of --src"),
    Param("remote", TEXT, "old name of --dst, still taken", cli_only="an old name of --dst"),
), tools=(
    Tool("data_verify", "verify", DATA, READS, "Verify a copy by hashes",
         "Compare content hashes of a local tree and its copy on a box; ok only when every file matches.",
         findings=True, args=(
             HOST1, a("local", "src", required=True), a("remote", "dst", required=True), a("exclude"),
             a("include_git"), a("rehash"), WAIT)),
))


VERBS = (PUSH, PULL, VERIFY)

REQUEST_ID = a("request_id", kind=TEXT, required=True, why="the CLI runs a copy in the foreground (Ctrl-C ends it)",
               tip="the request_id a copy answered with")
# The server's own tools: no verb is made of them.
TOOLS = (
    Tool("request_wait", None, DATA, READS, "Wait for a request",
         "Wait for a copy that answered with a request_id; returns its result when it ends.", local=True,
         args=(REQUEST_ID, a("timeout_s", kind=SECS, default=WAIT_S, low=0, high=WAIT_S,
                             why="the CLI waits in the foreground", tip="seconds at most; call again while running"))),
    Tool("request_cancel", None, DATA, CHANGES, "Cancel a request",
         "Cancel a copy that answered with a request_id: it stops, and claims nothing.", local=True,
         args=(REQUEST_ID,)),
)
