"""The job actions' entries on the box (launch, status, stop, wait, stream, pause, queue, diagnose),
each calling the job's engine through gpuops.onbox.engines.
"""
