"""A run's supervisor on the box: the attempt loop, what it watches each round, its pure rules,
its records and events, checkpoints and their retention, and the process it outlives SSH in.
"""
