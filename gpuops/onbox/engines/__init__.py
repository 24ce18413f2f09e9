"""Each job engine's box half (box_*, slurm*, ray_*), and the registry (registry.py) that picks a job's
engine from its record.

This __init__ stays empty: every module of the package imports it first, and a module that needs one
engine's words (the workstation's Slurm rules read onbox.engines.slurm) must not load every engine's
supervisor with them.
"""
