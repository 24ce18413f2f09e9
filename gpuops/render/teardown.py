"""teardown-check for people: the findings and the verdict, doctor-style."""

from . import doctor


def render(doc, con, show_all=False, verbose: bool = False) -> None:
    doctor(doc, con, show_all=show_all, verbose=verbose)
