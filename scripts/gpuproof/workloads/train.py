"""A short CUDA training run: an MLP on random data in bf16, a progress line every 25 steps in
the form trainers print, a checkpoint at the end. Exits 0 on success."""

import os
import sys
import time

import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
out = sys.argv[2] if len(sys.argv) > 2 else "ckpt.pt"
width = int(sys.argv[3]) if len(sys.argv) > 3 else 4096
dev = torch.device(os.environ.get("GPUPROOF_DEVICE", "cuda"))  # "cpu" lets the tests run it here
name = torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu"
print("device %s (%s), torch %s, CUDA %s" % (dev, name, torch.__version__, torch.version.cuda))
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.GELU(), torch.nn.Linear(width, width)).to(dev, torch.bfloat16)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(2 * width, width, device=dev, dtype=torch.bfloat16)
y = torch.randn(2 * width, width, device=dev, dtype=torch.bfloat16)
start = time.time()
for step in range(1, steps + 1):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if step % 25 == 0 or step == steps:
        if dev.type == "cuda":
            torch.cuda.synchronize()
        print("step %d/%d loss %.4f %.1f ms/step" % (step, steps, loss.item(), 1000 * (time.time() - start) / step))
tmp = out + ".tmp"
torch.save({"step": steps, "model": model.state_dict()}, tmp)
os.replace(tmp, out)
peak = torch.cuda.max_memory_allocated() / 2**20 if dev.type == "cuda" else 0
print("saved checkpoint %s at step %d; peak memory %.0f MiB" % (out, steps, peak))
