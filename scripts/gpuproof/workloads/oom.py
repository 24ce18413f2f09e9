"""A CUDA out-of-memory failure as a trainer meets it: a few steps, then an allocation larger than
the GPU, left uncaught so torch prints its own error and advice."""

import torch

dev = torch.device("cuda")
total = torch.cuda.get_device_properties(0).total_memory
w = torch.randn(1024, 1024, device=dev)
for step in range(1, 4):
    w = w @ w.T / 1024
    print("step %d loss %.4f" % (step, float(w.mean())), flush=True)
activations = torch.empty(int(total * 1.5), dtype=torch.uint8, device=dev)
print("unreachable", activations.shape)
