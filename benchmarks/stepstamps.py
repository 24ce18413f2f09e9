"""Rank 0's step stamps (tests/fixtures/runs/ddp_resume.py --stamps: `step start end job` a line),
read as the file grows: what the goodput benchmarks count useful time from."""


class Stamps(object):
    """Rank 0's step stamps, read as the file grows."""

    def __init__(self, path):
        self.path, self.read, self.rows = path, 0, []

    def poll(self):
        with open(self.path, "a+") as f:
            f.seek(self.read)
            chunk = f.read()
        whole = chunk[:chunk.rfind("\n") + 1]
        self.read += len(whole.encode())
        for line in whole.splitlines():
            step, start, end, job = line.split()
            self.rows.append({"step": int(step), "start": float(start), "end": float(end), "job": job})
        return self.rows

    def useful_s(self, until=None):
        last = {}
        for s in self.rows:  # a redone step replaces the run of it that a fault threw away
            if until is None or s["end"] <= until:
                last[s["step"]] = s["end"] - s["start"]
        return sum(last.values()), len(last)
