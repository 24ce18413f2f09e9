"""Bounded exponential backoff: transport failures are retried, but never for longer than asked.

A dropped connection on a rented box is normal (U12) and a resumable transfer should simply go
on; an endless retry loop, though, would hide a box that is gone. So retries stop at whichever
comes first: the time budget or the attempt cap.
"""

import time


class Backoff:
    def __init__(self, budget_s=300.0, first_s=1.0, factor=2.0, cap_s=30.0, max_retries=12,
                 clock=time.monotonic, sleep=time.sleep) -> None:
        self.budget_s, self.first_s, self.factor, self.cap_s = budget_s, first_s, factor, cap_s
        self.max_retries = max_retries
        self.retries = 0
        self._clock = clock
        self._sleep = sleep
        self._start = clock()

    def next_delay(self):
        """Seconds to wait before the next try, or None when the budget is spent."""
        if self.retries >= self.max_retries:
            return None
        delay = min(self.cap_s, self.first_s * self.factor ** self.retries)
        if self._clock() - self._start + delay > self.budget_s:
            return None
        return delay

    def wait(self) -> bool:
        """Sleep before the next try and count it; False when no try is left."""
        delay = self.next_delay()
        if delay is None:
            return False
        self.retries += 1
        self._sleep(delay)
        return True

    def elapsed(self) -> float:
        return self._clock() - self._start
