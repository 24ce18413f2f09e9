"""The keeper: a gpuops process off the box that looks after one run across boxes.

It copies each new complete checkpoint of the run, and the run's log and events, into a vault
(gpuops.keeper.vault), judges from what the box answers whether the box is lost
(gpuops.keeper.rules), relaunches the run on another fitting box of the fleet from the newest
verified checkpoint of the vault (gpuops.keeper.loop), stops the box when asked once everything is
verified in the vault, and keeps a ledger of where the money went (gpuops.keeper.ledger). A gang
(torchrun over several boxes) is relaunched by gpuops.keeper.gangattempt; stop commands, --budget's
and --stop-idle's, run through gpuops.keeper.stopping. Its record of the run (boxes, attempts,
vault, ledger) lives in the state dir (gpuops.keeper.record).
"""
