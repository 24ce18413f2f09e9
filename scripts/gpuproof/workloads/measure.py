"""A second opinion on gpuops' qualify figures, timed another way: CUDA events around a batch of
work instead of synchronize() and the wall clock. Prints one JSON line:
{"bf16_tflops", "h2d_gbps", "memory_gbps"}.

    python3 measure.py
"""

import json

import torch


def events(fn, repeat):
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeat):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1000.0 / repeat  # seconds per call


def main():
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    per = events(lambda: a @ b, 50)
    size = 256 << 20
    host = torch.empty(size, dtype=torch.uint8).pin_memory()
    dev = torch.empty(size, dtype=torch.uint8, device="cuda")
    h2d = events(lambda: dev.copy_(host, non_blocking=True), 20)
    big = 1 << 30
    src = torch.empty(big, dtype=torch.uint8, device="cuda")
    dst = torch.empty(big, dtype=torch.uint8, device="cuda")
    copy = events(lambda: dst.copy_(src), 20)
    print(json.dumps({"bf16_tflops": 2.0 * n ** 3 / per / 1e12, "h2d_gbps": size / h2d / 1e9,
                      "memory_gbps": 2.0 * big / copy / 1e9}))


if __name__ == "__main__":
    main()
