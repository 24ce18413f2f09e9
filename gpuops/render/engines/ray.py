"""Ray's words (its engine: gpuops.engines.ray)."""

from .base import Words


class RayWords(Words):
    nothing_alive = "it is not pending or running in Ray"

    def started(self, jid: str, meta: dict, said: str) -> str:
        return f"submitted {jid} to Ray as {meta.get('ray_submission_id')}: {said}"

    def target(self, target: dict) -> str:
        return f"Ray job {target['ray_submission_id']} ({target.get('status')})"

    def would_stop(self, jid: str, targets: list, signal: str | None, grace: float) -> str:
        return f"would stop {'; '.join(self.target(t) for t in targets)} (Ray: SIGTERM, then SIGKILL)"

    def stopped(self, data: dict, gone: bool) -> tuple[str, list]:
        jid = data["job_id"]
        ids = ", ".join(t["ray_submission_id"] for t in data["targets"])
        if gone:
            return f"stopped {jid} (Ray job {ids}); state {data['state']}", []
        return f"{jid}: Ray job {ids} has not ended after its stop ({data['state']})", []


WORDS = RayWords()
