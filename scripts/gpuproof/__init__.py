"""The real-GPU proof behind scripts/gpu-proof: gpuops run end to end against a real driver, each
answer set beside what the driver's own tools say, written up as a report.

smixml and compare are pure (tested on this machine without a GPU); run does the I/O on the GPU
machine; report writes the Markdown. The workloads are the CUDA programs the proof launches.
"""
