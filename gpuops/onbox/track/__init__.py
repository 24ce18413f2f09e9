"""Will a run's curves reach anyone: what TensorBoard and W&B read on the box, and the verdicts
the preflight and the run's supervisor judge them by.
"""
