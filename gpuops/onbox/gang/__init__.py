"""A gang run's nodes: the link between their supervisors, its rules, and the gang preflight.
"""
