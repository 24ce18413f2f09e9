"""Slurm's words (its engine: gpuops.engines.slurm)."""

from .base import Words, signals_sent


class SlurmWords(Words):
    queue_note = ", the rest waiting in Slurm's queue"
    nothing_alive = "it is not queued or running in Slurm"

    def started(self, jid: str, meta: dict, said: str) -> str:
        return f"submitted {jid} as Slurm job {meta.get('slurm_job_id')}: {said}"

    def target(self, target: dict) -> str:
        where = f" on {target['nodes']}" if target.get("nodes") else ""
        return f"Slurm job {target['slurm_job_id']} ({target.get('state')}{where})"

    def would_stop(self, jid: str, targets: list, signal: str | None, grace: float) -> str:
        first = "; ".join(self.target(t) for t in targets)
        before = f"send SIG{signal} to its batch shell, wait up to {grace:g}s, then " if signal else ""
        return f"would {before}scancel {first}"

    def stopped(self, data: dict, gone: bool) -> tuple[str, list]:
        jid, used = data["job_id"], signals_sent(data)
        ids = ", ".join(str(t["slurm_job_id"]) for t in data["targets"])
        if gone:
            return f"cancelled {jid} (Slurm job {ids}, {used}); state {data['state']}", []
        return f"{jid}: Slurm job {ids} has not ended after {used} ({data['state']})", []


WORDS = SlurmWords()
