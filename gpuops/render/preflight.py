"""Preflight for people: what the box is, then the findings worst first."""

from . import doctor


def headline(data) -> str:
    """One line of what the box is, above the findings."""
    g = data.get("gpu") or {}
    devices = g.get("devices") or []
    names = sorted({d.get("name") or "?" for d in devices})
    gpus = f"{len(devices)}x {', '.join(names)}" if devices else "no GPU"
    driver = f", driver {g['driver']} (CUDA <= {g.get('cuda_max') or '?'})" if g.get("driver") else ""
    torch = data.get("torch") or {}
    torch_text = f"; torch {torch['version']} (CUDA {torch.get('cuda')})" if torch.get("version") else ""
    cpu = data.get("cpu") or {}
    return f"{gpus}{driver}{torch_text}; {cpu.get('visible')} CPUs visible"


def render(doc, con, show_all=False, verbose: bool = False) -> None:
    from rich.text import Text

    doctor(doc, con, [Text(headline(doc.get("data") or {}))], show_all, verbose)
