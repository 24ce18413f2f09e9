"""The shape of a rank stuck in a collective: two steps, then GPU kernels that spin and do no
arithmetic (torch.cuda._sleep busy-waits on the clock, as NCCL's polling kernels do), so the GPU reads
100 % busy at near-idle power and the log says nothing more. Exits by itself after LIFETIME seconds so
no run of the proof can leave it behind. Two steps, not one: the supervisor counts progress as a count
that moves, and a run that never moved has the longer start-up allowance (imports, a rendezvous)."""

import os
import sys
import time

import torch

lifetime = float(sys.argv[1]) if len(sys.argv) > 1 else 150.0
device = os.environ.get("GPUPROOF_DEVICE", "cuda")  # "cpu" lets the tests run it here
x = torch.ones(1 << 20, device=device)
for step in (1, 2):
    print("step %d/1000 loss %.4f" % (step, float(x.sum() / x.numel())), flush=True)
deadline = time.time() + lifetime
while time.time() < deadline:
    if device == "cuda":
        torch.cuda._sleep(50_000_000)  # ~25 ms of spinning at ~2 GHz
        torch.cuda.synchronize()
    else:
        time.sleep(0.05)
