"""The keeper copies the run's log into the vault between checkpoints too (issue 36): a run that writes
no checkpoint for a long while still has its log off the box, at least each LOGS_EVERY_S (here 1 s),
so a box lost then leaves its log up to the last copy."""

from gpuops.keeper import record
from tests.jobs.helpers import wait_for
from tests.keeper.test_keeper_boxes import command, ended, held, launch


def _copied(fleet, run, box):
    return b"".join(p.read_bytes() for p in (fleet.vault / run / "boxes" / f"1-{box}").glob("*/log"))


def test_a_runs_log_is_copied_between_checkpoints(fleet, monkeypatch):
    from gpuops.keeper import start

    a = fleet.box(1.0)
    spawned = start.spawn
    monkeypatch.setattr(start, "spawn", lambda run_id: _often(run_id) or spawned(run_id))
    run, _ = launch(fleet, command(steps=40, every=1000))  # no checkpoint until the run's end
    seen = [b""]

    def copied_to_step_12() -> bool:
        seen[0] = _copied(fleet, run, a)
        return b"step 12 " in seen[0]

    assert wait_for(copied_to_step_12, timeout=120, every=0.5), record.read(run)["events"]
    assert b"final step" not in seen[0]  # copied while the run went on (steps 13 to 40 take 7 s more)
    assert held(fleet, run) == []  # with no checkpoint to carry it
    r = ended(run, 120)
    assert r["phase"] == record.FINISHED and b"final step 40" in _copied(fleet, run, a)


def _often(run_id) -> None:
    """The run's keeper copies its log at least each second (its record, before the keeper starts)."""
    rec = record.read(run_id)
    rec["spec"]["logs_every_s"] = 1.0
    record.write(rec)
