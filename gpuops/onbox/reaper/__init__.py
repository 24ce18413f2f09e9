"""Who holds the GPUs, judged by pure rules, and the reap that frees VRAM a dead run left.
"""
