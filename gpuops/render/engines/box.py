"""The box's supervisor's words (its engine: gpuops.engines.box)."""

from .base import Words, signals_sent


class BoxWords(Words):
    nothing_alive = "none of its processes is alive"

    def started(self, jid: str, meta: dict, said: str) -> str:
        return f"started {jid} (pid {meta.get('pid')})"

    def target(self, target: dict) -> str:
        return f"pid {target['pid']}{' [GPU]' if target.get('gpu') else ''}: {target.get('cmd') or ''}"

    def would_stop(self, jid: str, targets: list, signal: str | None, grace: float) -> str:
        gpu = sum(1 for t in targets if t.get("gpu"))
        return (f"would send SIGTERM to {len(targets)} process(es) of {jid} ({gpu} holding a GPU), SIGKILL after "
                f"{grace:g}s")

    def stopped(self, data: dict, gone: bool) -> tuple[str, list]:
        jid, used = data["job_id"], signals_sent(data)
        if gone:
            return f"stopped {jid}: {len(data['targets'])} process(es) gone ({used}); state {data['state']}", []
        left = ", ".join(str(r["pid"]) for r in data["remaining"])
        return (f"{jid}: processes still alive after {used}: {left}",
                ["A process that outlives SIGKILL is stuck in the kernel (state D, often inside the GPU driver): it "
                 "goes with a GPU reset or a reboot."])


WORDS = BoxWords()
