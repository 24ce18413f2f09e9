"""Unit helpers shared by the checks (evidence is shown in GiB with two decimals)."""

GIB = 1024 ** 3


def gib(n):
    return None if n is None else round(n / GIB, 2)
