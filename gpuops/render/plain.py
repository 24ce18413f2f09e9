"""An answer whose summary says it all (`disconnect`): that line, as it is."""


def summary(doc: dict, con) -> None:
    con.print(doc["summary"], markup=False)
