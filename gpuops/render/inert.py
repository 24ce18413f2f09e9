"""Text a box sent, made harmless for a terminal before a person's output shows it.

A GPU name, a job name, a path or a log line is the box's to choose: an escape sequence in it
(`\\x1b[2J`, `\\x1b]0;title\\x07`) would clear the screen or retitle the window if printed as it
is, and a bidi override would make a line read other than it is. Every human-readable output
(gpuops.cli.common prints each envelope through `envelope` below; the few lines printed outside
an envelope go through `text`) shows such characters escaped, the way Python's repr does, on a
terminal and through a pipe alike. --json keeps the exact value: JSON escapes them itself.
"""

import re

# C0 and C1 controls and DEL (what terminals act on), the line and paragraph separators, the
# bidi marks, embeddings, overrides and isolates (they reorder what follows), and lone
# surrogates (undecodable bytes kept by surrogateescape; printing one raises).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(match):
    c = match.group()
    if c in _NAMED:
        return _NAMED[c]
    n = ord(c)
    if 0xDC80 <= n <= 0xDCFF:  # the byte surrogateescape stood in for
        return f"\\x{n - 0xDC00:02x}"
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}"


def text(value: str) -> str:
    """`value` with every control character shown escaped (`\\x1b`, `\\n`, `\\u202e`)."""
    return _UNSAFE.sub(_escaped, value)


def shell_word(word: str, quote) -> str:
    """`word` for a command line a person pastes: `quote(word)` (shell quoting), or where it holds
    a control character bash's $'...' with the character escaped, which reads back as the very
    same bytes (a path with a newline, a name with an escape sequence)."""
    if not _UNSAFE.search(word):
        return quote(word)
    return "$'" + text(word.replace("\\", "\\\\").replace("'", "\\'")) + "'"


def envelope(value):
    """A copy of an envelope (or any JSON-shaped value) with every string, keys included, made
    inert by `text`; numbers, booleans and None as they were. A next step's `argv` stays exact:
    gpuops.render.step_text quotes it with shell_word, inert and still the same command."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {envelope(k): v if k == "argv" and _words(v) else envelope(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [envelope(v) for v in value]
    return value


def _words(value):
    return isinstance(value, list) and all(isinstance(w, str) for w in value)


# What a log may keep on a person's screen: colours (SGR: ESC [ digits ; m), and the line, carriage
# return and tab controls a progress bar draws with. Anything else a terminal acts on is escaped.
_SGR = re.compile(r"\x1b\[[0-9;]{0,32}m")
_SGR_PREFIX = re.compile(r"\x1b(\[[0-9;]{0,32})?\Z")
_LINE_CONTROLS = "\n\r\t"


def _escaped_in_log(match):
    return match.group() if match.group() in _LINE_CONTROLS else _escaped(match)


class LogBytes:
    """A job's log as a terminal may show it, fed in the chunks a stream brings: colours and line
    controls kept, every other control sequence (a screen clear, a window title, a cursor move) and
    bidi mark escaped as `text` shows it. A sequence cut between chunks waits for the rest."""

    def __init__(self) -> None:
        import codecs

        self._decode = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
        self._held = ""

    def feed(self, data: bytes, final=False) -> bytes:
        chunk = self._held + self._decode.decode(data, final)
        self._held = ""
        if not final:
            cut = _SGR_PREFIX.search(chunk)
            if cut:
                chunk, self._held = chunk[:cut.start()], chunk[cut.start():]
        out, at = [], 0
        for m in _SGR.finditer(chunk):
            out.append(_UNSAFE.sub(_escaped_in_log, chunk[at:m.start()]))
            out.append(m.group())
            at = m.end()
        out.append(_UNSAFE.sub(_escaped_in_log, chunk[at:]))
        return "".join(out).encode("utf-8", "surrogateescape")

    def close(self) -> bytes:
        return self.feed(b"", final=True)
