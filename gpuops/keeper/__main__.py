"""`python -m gpuops.keeper RUN_ID`: the keeper process of one run (started detached by
gpuops.keeper.start). One keeper per run: a second finds the first alive in the pid file and exits 3."""

import sys

from . import loop, record, vault


def main(argv) -> int:
    if len(argv) != 1:
        print("usage: python -m gpuops.keeper RUN_ID", file=sys.stderr)
        return 2
    run_id = argv[0]
    away = (record.read(run_id) or {}).get("keeper_host") if vault.plain(run_id) else None
    if away:  # handed to a keeper host (launch --keeper-host): a second keeper here would move the run too
        print(f"run {run_id} is kept on {away.get('host')}; start its keeper there", file=sys.stderr)
        return 3
    if not record.claim_pid(run_id):
        print(f"run {run_id} already has a live keeper", file=sys.stderr)
        return 3
    return loop.Keeper(run_id).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
