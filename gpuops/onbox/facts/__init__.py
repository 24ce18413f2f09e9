"""Facts about the box in one round trip each: the probe, the fleet's samples, the qualify
measurements, an engine's cluster and what a keeper asks.
"""
