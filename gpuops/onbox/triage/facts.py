"""What one pass over a log keeps: bounded facts for classify.py, whatever the log's size."""

from collections import deque

MAX_TRACKED = 4096


class Occ:
    """One matched line: where, what (bounded bytes), which task printed it, the step before it."""

    __slots__ = ("line", "text", "task", "step_at", "sig", "detail", "event")

    def __init__(self, line, text, task=None, step_at=None, sig=None, detail=None, event=None):
        self.line, self.text, self.task, self.step_at, self.sig, self.detail = line, text, task, step_at, sig, detail
        # The line of the event this belongs to: a cause printed inside a traceback counts from
        # the traceback's first line.
        self.event = line if event is None else event

    def decoded(self):
        return self.text.decode("utf-8", "replace").replace("\x00", "\\0")


def _key(step_at):
    return -1 << 62 if step_at is None else step_at


class Hits:
    """The occurrences of one class, bounded: the first few, the last few, and the first one at
    each of the three highest 'step before it' values (which is where a terminal error is)."""

    __slots__ = ("count", "first", "last", "by_step")

    def __init__(self):
        self.count = 0
        self.first = []
        self.last = deque(maxlen=2)
        self.by_step = {}

    def add(self, occ):
        self.count += 1
        if len(self.first) < 3:
            self.first.append(occ)
        else:
            self.last.append(occ)
        if occ.step_at in self.by_step:
            return
        if len(self.by_step) >= 3:
            lowest = min(self.by_step, key=_key)
            if _key(occ.step_at) < _key(lowest):
                return
            del self.by_step[lowest]
        self.by_step[occ.step_at] = occ

    def all(self):
        return self.first + list(self.last)


class Facts:
    """Everything classify needs, bounded in size whatever the log's size."""

    def __init__(self):
        self.lines = 0
        self.bytes = 0
        self.truncated = False
        self.last_line = None
        self.classes = {}
        self.cancel_hint = None
        self.summary_marker = None
        self.summary = None
        self.success = None           # a trainer's completion marker (the last one)
        self.weak_success = None      # one a failed run prints too (W&B sync): see signatures
        self.keras_epoch = None       # (epoch, of epochs) of the last Keras `Epoch E/N` header
        self.end_report = None        # the last terminal failure evidence (signatures.END_REPORT_SIGNATURES)
        self.frameworks = {}          # framework (frameworks.py) -> lines that showed it
        self.restart = None           # the last notice that the run goes on (an elastic restart)
        self.progress_marks = deque(maxlen=2)  # lines of the last two progress lines that are no steps
        self.max_epochs = None        # the epochs a config dump asks for (frameworks.py, kind total)
        self.pt_steps = self.pt_ckpt = self.pt_period = None
        self.cfg_steps = self.cfg_ckpt = self.cfg_period = None
        self.ray = None
        self.tunnel = None
        self.tunnel_specs = []
        self.prometheus_port = None
        self.self_death = {}
        self.accused = set()
        self.crash_by_task = {}
        self.restore = None
        self.slurm_id = None
        self.collective = False       # a collective library (NCCL/RCCL) came up, or torchrun started 2+ ranks
        self.world = None             # the most ranks or nodes a launcher line names
        self.node_exits = {}
        self.stage_now = None
        self.step_form = None         # gpuops.onbox.triage.steps form name the log prints its steps in
        self.form_total = None        # the total a step line names (`N/M`), when it names one
        self.first_step = None
        self.last_step = None
        self.last_step_occ = None
        self.step_time = None
        self.steady_steps = 0
        self.task_last_steps = {}
        self.last_step_basis = None   # (Stamp, seconds to add, steps to add at step time)
        self.end_stamp = None
        self.year_hint = None
        self.engine = "python"
        self.pieces = 0

    def add(self, cls, occ):
        hits = self.classes.get(cls)
        if hits is None:
            hits = self.classes[cls] = Hits()
        hits.add(occ)
