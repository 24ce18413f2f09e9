"""A report redrawn in place until Ctrl-C (`fleet --watch`, `status --watch`), the way nvitop and
`watch` do: a spinner at once saying what is asked, then each round's view with the time it was
taken, the last complete report returned for the caller to print as the final one (rich Live
erases its own drawing, and the cursor is shown again however it ends)."""

import contextlib
import time

PAUSE_S = 1.0


def start(live, **start_kw):
    """Start a rich Live (or Progress) so that Ctrl-C inside its start leaves the terminal as it was.
    rich marks a Live started before it has set itself up; a SIGINT in between (the cursor hidden,
    no render hook pushed yet) made its stop raise IndexError popping that hook, which skipped
    showing the cursor again and ended the verb as an internal error (exit 70) where Ctrl-C is 130."""
    try:
        live.start(**start_kw)
    except BaseException:
        console = getattr(live, "console", None) or live.live.console
        with contextlib.suppress(IndexError):  # the render hook it never pushed
            live.stop()
        console.show_cursor(True)
        raise


@contextlib.contextmanager
def shown(live):
    """`live` started (see start) and drawn at once while the block runs, and stopped however it
    ends."""
    start(live, refresh=True)
    try:
        yield live
    finally:
        live.stop()


def watch(produce, con, view, asking, pause_s=PAUSE_S):
    """Redraw `view(doc, width)` (a rich renderable) from `produce()` until Ctrl-C; the last
    complete doc. Ctrl-C before the first one is complete propagates: only the spinner showed."""
    from rich.console import Group
    from rich.live import Live
    from rich.spinner import Spinner
    from rich.text import Text

    from .inert import envelope

    last = None
    with shown(Live(Spinner("dots", text=Text(asking), style="dim"), console=con, refresh_per_second=8,
                    transient=True)) as live:
        try:
            while True:
                last = produce()
                inert = envelope(last)  # the caller's final report makes its own copy inert
                stamp = time.strftime("%H:%M:%S", time.localtime())
                foot = Text(f"{inert['summary']}  (at {stamp}; Ctrl-C ends)")
                live.update(Group(fitted(con, view(inert, con.width), foot), foot), refresh=True)
                time.sleep(pause_s)
        except KeyboardInterrupt:
            if last is None:
                raise
    return last


def fitted(con, body, foot):
    """`body` cut to the rows the terminal has left above `foot`, with a last row that counts the
    rows left out. rich's Live cuts a drawing taller than the terminal at its bottom, so a watch of
    more jobs than rows lost its summary (the line that says what the table counts) to `...`."""
    from rich.segment import SegmentLines
    from rich.text import Text

    options = con.options.update(height=None)
    lines = con.render_lines(body, options, pad=False)
    room = con.height - len(con.render_lines(foot, options, pad=False)) - 1  # Live keeps the cursor's row
    if len(lines) <= room:
        return SegmentLines(lines, new_lines=True)
    kept = max(0, room - 1)
    more = Text(f"… {len(lines) - kept} more rows: a taller terminal shows them", style="dim")
    return SegmentLines(lines[:kept] + con.render_lines(more, options, pad=False)[:1], new_lines=True)
