"""Where the traceback a task is printing fails, for exception lines that mean one thing in one
place only: ENOSPC while creating a semaphore is /dev/shm (signatures.CONTEXT_ROUTES), a
BadZipFile inside a checkpoint loader is a checkpoint that cannot be opened ("after:NAME" rules).

A frame line that names such a place ("ctx:NAME" signatures) marks the task's current traceback;
a new traceback header of the task clears its marks, and a mark older than TRACEBACK_SPAN lines
no longer counts. Bounded: at most MAX_TRACKED tasks, each with the few names the signatures use.
"""

from typing import Dict, Optional

from . import signatures as S
from .facts import MAX_TRACKED


class Contexts:
    def __init__(self) -> None:
        self.by_task: Dict[Optional[int], Dict[str, int]] = {}

    def opened(self, task: Optional[int]) -> None:
        """A traceback header of `task`: what its earlier tracebacks named no longer applies."""
        self.by_task.pop(task, None)

    def mark(self, task: Optional[int], name: str, line: int) -> None:
        if task in self.by_task or len(self.by_task) < MAX_TRACKED:
            self.by_task.setdefault(task, {})[name] = line

    def has(self, task: Optional[int], name: str, line: int) -> bool:
        seen = self.by_task.get(task, {}).get(name)
        return seen is not None and 0 <= line - seen <= S.TRACEBACK_SPAN

    def route(self, cls: str, task: Optional[int], line: int) -> str:
        """The class a match of `cls` stands for where the task's traceback named a context."""
        for (source, name), target in S.CONTEXT_ROUTES.items():
            if cls == source and self.has(task, name, line):
                return target
        return cls
