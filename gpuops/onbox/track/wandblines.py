"""Did the run's W&B curves go anywhere? Read from the lines wandb itself prints (gotcha U35).

wandb prints its header through its terminal printer, each line prefixed "wandb: "
(wandb/sdk/wandb_run.py, _header_sync_info and _header_run_info): "Tracking run with wandb version
V", "Run data is saved locally in DIR", then online "Syncing run NAME" (or "Resuming run NAME") and
"View run at URL", offline "W&B syncing is set to `offline` in this directory." instead. A detached
run without a key stops with "No API key configured. Use `wandb login` to log in."
(wandb/sdk/lib/wbauth/authenticate.py), which logger wrappers often catch and turn into W&B
switched off. So the absence of the Syncing line, once wandb said anything, is the signal.
WANDB_MODE=offline or disabled in the job's environment says the same before wandb prints a line.
Pure: the log's head and tail come in, a state and its advice go out. The job's own supervisor
reads them too, in the run's first minutes (gpuops.onbox.track.trackwatch), so this module is shipped.
"""

import re

from ..triage import escapes

_SYNCING = re.compile(r"wandb: (?:Syncing|Resuming) run (\S[^\r\n]*)")
_URL = re.compile(r"wandb: \S* ?View run at (\S+)")
_LOCAL = re.compile(r"wandb: Run data is saved locally in (\S+)")
_HEADER = "wandb: Tracking run with wandb version"
_OFFLINE = "W&B syncing is set to `offline`"
_NO_KEY = "No API key configured"
TEXT_MAX = 300


def wandb(head, tail, env=None):
    """{id, state (syncing|offline|no-key|not-syncing|disabled), run, url, dir, gotcha}, or None when
    the log shows no sign of W&B and the job was not told to use it."""
    text = escapes.strip_text((head or "") + "\n" + (tail or ""))
    mode = ((env or {}).get("WANDB_MODE") or "").strip().lower()
    syncing, url, local = _SYNCING.search(text), _URL.search(text), _LOCAL.search(text)
    out = {"id": "tracker.wandb-log", "state": None, "run": None, "url": url.group(1)[:TEXT_MAX] if url else None,
           "dir": local.group(1)[:TEXT_MAX] if local else None, "gotcha": "U35"}
    if syncing:
        out.update(state="syncing", run=syncing.group(1).strip()[:TEXT_MAX])
    elif _OFFLINE in text:
        out["state"] = "offline"
    elif _NO_KEY in text:
        out["state"] = "no-key"
    elif _HEADER in text or local:
        out["state"] = "not-syncing"
    elif mode == "disabled":
        out["state"] = "disabled"
    elif mode in ("offline", "dryrun"):  # told so before wandb said anything
        out["state"] = "offline"
    else:
        return None
    return out


def advice(found) -> list:
    """One advice line for a run whose curves do not reach W&B; none when they do."""
    if not found or found["state"] == "syncing":
        return []
    where = found.get("dir") or "the run's wandb/ directory"
    return [{
        "offline": f"W&B ran offline: no live curves; they stay in {where} on the box until `wandb sync {where}` "
                   "(pull it before teardown).",
        "no-key": "W&B never started: the box has no API key ('No API key configured'), so this run keeps no "
                  "curves; relaunch with --secret-env WANDB_API_KEY.",
        "not-syncing": "wandb started but never printed 'Syncing run': no curves are being sent; look for its "
                       "error in the log and check the key (gpuops preflight).",
        "disabled": "WANDB_MODE=disabled: this run sends W&B nothing.",
    }[found["state"]]]
