"""Hold MIB of GPU memory and do nothing else: the shape of a VRAM zombie (a forgotten notebook
kernel, a dataloader worker whose trainer died). Writes its pid to READY once the memory is held,
then sleeps; it exits by itself after LIFETIME seconds so no run of the proof can leave it behind."""

import os
import sys
import time

import torch

mib, ready = int(sys.argv[1]), sys.argv[2]
lifetime = float(sys.argv[3]) if len(sys.argv) > 3 else 240.0
device = os.environ.get("GPUPROOF_DEVICE", "cuda")  # "cpu" lets the tests run it here
block = torch.empty(mib * 2**20, dtype=torch.uint8, device=device)
block.fill_(1)
if device == "cuda":
    torch.cuda.synchronize()
with open(ready + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.replace(ready + ".tmp", ready)
deadline = time.time() + lifetime
while time.time() < deadline:
    time.sleep(0.5)
