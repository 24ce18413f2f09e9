"""gpuops: operate rented, metered GPU machines over SSH without losing runs, data or money."""

__version__ = "0.1.0"
