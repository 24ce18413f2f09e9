"""Tables that fit the terminal the way `kubectl get` does: a header row, no borders, and at a
narrow width whole columns left out by priority, instead of every column squeezed until one is
nothing. A pipe is 1000 columns wide (gpuops.render.console), so it gets every column in full."""

from rich.cells import cell_len

GAP = 2  # spaces between two columns: each cell's one space of padding on either side


def fit(columns, width: int):
    """{key: width} of the columns to show. columns: [(key, natural width, least width)], most
    important first; least is how narrow a column may be cut (0: never cut). Columns go in, at
    their least width, while they fit; one that does not is left out and the next, less
    important one is tried. The room left then widens the cut ones, in priority order, up to
    their natural width."""
    shown = {}
    for key, natural, least in columns:
        need = min(natural, least) if least else natural
        if sum(shown.values()) + GAP * len(shown) + need <= width:
            shown[key] = need
    spare = width - sum(shown.values()) - GAP * (len(shown) - 1)
    for key, natural, _ in columns:
        if key in shown and spare > 0:
            grow = min(natural - shown[key], spare)
            shown[key] += grow
            spare -= grow
    return shown


def table(header, rows, priority, least, width: int):
    """A rich Table of `rows` (dicts of plain text or rich Text by header key) with the columns of
    `header` (display order) that fit `width`, chosen by `priority` (keys, most important first);
    least: {key: the narrowest it may be cut to} for the columns that may be cut (with …)."""
    from rich.table import Table
    from rich.text import Text

    def plain(value):
        return value.plain if isinstance(value, Text) else str(value)

    natural = {k: max([cell_len(k)] + [cell_len(plain(r[k])) for r in rows]) for k in header}
    widths = fit([(k, natural[k], least.get(k, 0)) for k in priority], width)
    out = Table(box=None, pad_edge=False, padding=(0, 1), show_edge=False, header_style="bold", expand=False)
    keys = [k for k in header if k in widths]
    for k in keys:
        out.add_column(k, width=widths[k], no_wrap=True, overflow="ellipsis")
    for r in rows:  # a str cell is text, never markup: a job named "a[/]b" is shown, not parsed
        out.add_row(*(r[k] if isinstance(r[k], Text) else Text(str(r[k])) for k in keys))
    return out
