"""Terminal escape sequences in what a job prints, and its text without them.

Trainers colour their lines and draw bars with cursor controls: loguru wraps the time, level and
message in SGR colours (`\\x1b[32m...\\x1b[0m`), Keras' Progbar bolds its count, rich moves the
cursor up and erases lines (`\\x1b[1A\\x1b[2K`) and may link text (`\\x1b]8;;URL\\x1b\\\\`). A
rule that reads the words of a line (triage's summary, the tracker header, the progress forms of
gpuops.onbox.triage.steps) reads them with these removed, or `\\x1b[1mstep 5` would not be a step line.

One grammar of sequences (ECMA-48), for bytes and for text:
    CSI  ESC [ parameters intermediates final      colours, cursor moves, erases
    OSC  ESC ] ... BEL or ESC \\                     titles, hyperlinks (bounded in length)
    ESC and one character                          charset selection `ESC ( B`, keypad modes
Line controls stay: a line ends at \\n, and a bar drawn in place ends each draw with \\r; a
backspace is how Keras' Progbar backs over its last draw, so `plain` turns it into a \\r too.
The other C0 controls are dropped from the plain text (a BEL in a line is no word of it).

Stdlib only: shipped to the box (the supervisor's progress rules) and imported by triage.
"""

import re

_PATTERN = (r"\x1b\[[0-?]{0,64}[ -/]{0,8}[@-~]"      # CSI
            r"|\x1b\][^\x07\x1b]{0,2048}(?:\x07|\x1b\\)"  # OSC, ended by BEL or ST
            r"|\x1b[ -/]{0,4}[0-~]")                  # a two-character escape (with intermediates)
SEQUENCE = re.compile(_PATTERN.encode("ascii"))
SEQUENCE_TEXT = re.compile(_PATTERN)
_OTHER_CONTROLS = re.compile(rb"[\x00-\x07\x0b\x0c\x0e-\x1f\x7f]")


def strip(data):
    """`data` (bytes) without its escape sequences."""
    return SEQUENCE.sub(b"", data) if b"\x1b" in data else data


def strip_text(text: str):
    """The same for a str."""
    return SEQUENCE_TEXT.sub("", text) if "\x1b" in text else text


def plain(data):
    """What a person reads of `data` (bytes), line by line: escape sequences removed, a backspace
    turned into a carriage return (a redraw), and the other controls (BEL, NUL, a lone ESC) gone;
    \\n, \\r and \\t kept."""
    data = strip(data)
    if b"\x08" in data:
        data = data.replace(b"\x08", b"\r")
    return _OTHER_CONTROLS.sub(b"", data)
