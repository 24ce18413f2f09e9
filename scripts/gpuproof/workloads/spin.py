"""The shape of a rank stuck in a collective: one progress line, then GPU kernels that spin and do no
arithmetic (torch.cuda._sleep busy-waits on the clock, as NCCL's polling kernels do), so the GPU reads
100 % busy at near-idle power and the log says nothing more. Exits by itself after LIFETIME seconds so
no run of the proof can leave it behind."""

import os
import sys
import time

import torch

lifetime = float(sys.argv[1]) if len(sys.argv) > 1 else 150.0
device = os.environ.get("GPUPROOF_DEVICE", "cuda")  # "cpu" lets the tests run it here
x = torch.ones(1 << 20, device=device)
print("step 1/1000 loss %.4f" % float(x.sum() / x.numel()), flush=True)
deadline = time.time() + lifetime
while time.time() < deadline:
    if device == "cuda":
        torch.cuda._sleep(50_000_000)  # ~25 ms of spinning at ~2 GHz
        torch.cuda.synchronize()
    else:
        time.sleep(0.05)
