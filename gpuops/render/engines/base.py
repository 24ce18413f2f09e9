"""The words every engine says (gpuops.render.engines): the defaults are an engine with nothing
of its own to say. Pure: facts in, text out."""


class Words:
    # what a queue summary adds about the entries still waiting, for an engine that chains them
    queue_note = ""
    # the end of 'nothing to stop: J is STATE and ...'
    nothing_alive = "it is not running"

    def started(self, jid: str, meta: dict, said: str) -> str:
        """A launch's summary once the job is on its way (`said`: its state as one line)."""
        return f"started {jid}"

    def target(self, target: dict) -> str:
        """One stop target, as the engine's box half lists it (gpuops.engines' stop_target shape)."""
        return str(target)

    def would_stop(self, jid: str, targets: list, signal: str | None, grace: float) -> str:
        """A stop's dry run: 'would ...'."""
        return f"would stop {jid}"

    def stopped(self, data: dict, gone: bool) -> tuple[str, list]:
        """(summary, advice) of a stop that acted, from its answer's data (job_id, targets, state,
        signals, remaining) and whether every target is gone."""
        jid, state = data["job_id"], data["state"]
        return (f"stopped {jid}; state {state}" if gone else f"{jid} has not ended ({state})"), []


def signals_sent(data: dict) -> str:
    """The signals a stop sent, in order: 'SIGTERM+SIGKILL'."""
    return "+".join(s["signal"] for s in data["signals"])
