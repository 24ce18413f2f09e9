"""Typed, line-aware loading of TOML data files (platform profiles, the gotcha index).

A schema is a frozen dataclass: its fields are the allowed keys, a field without a default is
required, and the annotation is the type. `metadata` may carry `choices` (allowed strings), `min`
(the least allowed number) and `doc` (one line for the generated schema docs);
`metadata={"file": False}` marks a field the loader fills in itself, and `tables` (a call giving
{name: dataclass}) one that holds named tables of the file's own table ([slurm] of a profile). A
float is always finite: TOML's nan and inf are never a meaningful duration, price or size. Every
mistake becomes one UsageError line that names the file, the line and the key, e.g.
`profiles/x.toml:12: billing.meter_stop_verb: expected a string, got 3`. A document nested deeper
than MAX_DEPTH is refused before tomllib, which recurses, reads it.

tomllib reports line numbers only for syntax errors, so `key_lines` scans the text itself: it
understands tables, arrays of tables, dotted keys and multi-line strings/arrays, which is all
our files use. An unlocatable key falls back to its table's header line, then line 1.
"""

import dataclasses
import math
import re
import types
import typing
from collections.abc import Mapping

from .errors import UsageError

_HEADER = re.compile(r"^\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEYVAL = re.compile(r"""^((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*=\s*(.*)$""")
_TOML_POS = re.compile(r"\s*\(at line (\d+), column (\d+)\)")
_TYPE_WORDS = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}
# tomllib parses nested arrays and inline tables recursively: a few thousand levels end in a
# RecursionError. Our files nest two or three deep.
MAX_DEPTH = 32
_NESTING = re.compile(r"""[\[\]{}#"']""")
_STRINGS = [re.compile(p, re.S) for p in (  # the multi-line kinds first: they open with the same quote
    r'"""(?:[^"\\]|\\.|"(?!""))*"""(?:"{1,2})?',  # up to two quotes may end the body
    r"'''(?:[^']|'(?!''))*'''(?:'{1,2})?",
    r'"(?:[^"\\\n]|\\.)*"?',  # one left open ends with its line (tomllib then reports it)
    r"'[^'\n]*'?",
)]


def _split_dotted(key: str) -> tuple:
    parts = re.findall(r"""[A-Za-z0-9_-]+|"[^"]*"|'[^']*'""", key)
    return tuple(p[1:-1] if p[:1] in "\"'" else p for p in parts)


def _strip_strings(text: str) -> str:
    """The line with string contents and comments removed, so brackets can be counted."""
    out, quote, i = [], None, 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            break
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def key_lines(text: str) -> dict:
    """Map key paths (tuples; array-of-table entries carry their index) to 1-based line numbers."""
    lines, table, counts = {(): 1}, (), {}
    open_string, depth = None, 0
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if open_string:
            if line.count(open_string) % 2 == 1:
                open_string = None
            continue
        if depth > 0:
            stripped = _strip_strings(line)
            depth += stripped.count("[") + stripped.count("{") - stripped.count("]") - stripped.count("}")
            continue
        if not line or line.startswith("#"):
            continue
        header = _HEADER.match(line)
        if header and not _KEYVAL.match(line):
            name = _split_dotted(header.group(1))
            if line.startswith("[["):
                counts[name] = counts.get(name, -1) + 1
                table = name + (counts[name],)
            else:
                table = name
            lines.setdefault(table, no)
            continue
        keyval = _KEYVAL.match(line)
        if not keyval:
            continue
        path = table + _split_dotted(keyval.group(1))
        lines.setdefault(path, no)
        rest = keyval.group(2)
        for quote in ('"""', "'''"):
            if rest.startswith(quote) and rest.count(quote) == 1:
                open_string = quote
        if not open_string:
            stripped = _strip_strings(rest)
            depth = stripped.count("[") + stripped.count("{") - stripped.count("]") - stripped.count("}")
    return lines


def dotted(path: tuple) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


class Source:
    """A file being loaded: its display name and key→line map, for precise error lines."""

    def __init__(self, name: str, text: str) -> None:
        self.name = name
        self.lines = key_lines(text)

    def line_of(self, path: tuple) -> int:
        path = tuple(path)
        while path not in self.lines and path:
            path = path[:-1]
        return self.lines.get(path, 1)

    def error(self, path: tuple, problem: str, at: tuple | None = None) -> UsageError:
        line = self.line_of(path if at is None else at)
        return UsageError(f"{self.name}:{line}: {dotted(path)}: {problem}")


def _too_deep(text: str) -> int:
    """The line where arrays and inline tables (outside strings and comments) nest deeper than
    MAX_DEPTH, else 0. Exact for valid TOML, which is all tomllib would recurse into."""
    depth, i = 0, 0
    while True:
        found = _NESTING.search(text, i)
        if not found:
            return 0
        ch, i = found.group(), found.end()
        if ch == "#":
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
        elif ch in "\"'":
            i = next(m.end() for m in (rx.match(text, found.start()) for rx in _STRINGS) if m)
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return text.count("\n", 0, i) + 1
        else:
            depth = max(0, depth - 1)


def parse(name: str, text: str):
    """(data, Source) for TOML text; a syntax error names the file, the line and the key there."""
    import tomllib

    deep = _too_deep(text)
    if deep:
        raise UsageError(f"{name}:{deep}: arrays or tables nested more than {MAX_DEPTH} deep")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        message = str(e)
        pos = _TOML_POS.search(message)
        line = int(pos.group(1)) if pos else 1
        where = ""
        lines = text.splitlines()
        if 0 < line <= len(lines):
            keyval = _KEYVAL.match(lines[line - 1].strip())
            if keyval:
                where = f" in key '{keyval.group(1)}'"
        detail = _TOML_POS.sub("", message).strip()
        raise UsageError(f"{name}:{line}: not valid TOML{where}: {detail}") from None
    return data, Source(name, text)


def _describe(value) -> str:
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return f"string {value!r}"[:60]
    return f"{ {int: 'integer', float: 'number'}.get(type(value), type(value).__name__)} {value!r}"


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _convert(tp, value, path, src, meta):
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(options) == 1:
            return _convert(options[0], value, path, src, meta)
        if all(o in (int, float, str, bool) for o in options):
            for option in options:
                try:
                    return _convert(option, value, path, src, meta)
                except UsageError:
                    pass
            words = " or ".join(_TYPE_WORDS[o] for o in options)
            raise src.error(path, f"expected {words}, got {_describe(value)}")
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise src.error(path, f"expected a table, got {_describe(value)}")
        return build(tp, value, src, path)
    if origin is tuple:
        item_type = typing.get_args(tp)[0]
        if not isinstance(value, list):
            raise src.error(path, f"expected an array, got {_describe(value)}")
        return tuple(_convert(item_type, item, path + (i,), src, meta) for i, item in enumerate(value))
    if origin in (Mapping, dict) or tp in (Mapping, dict):
        key_type, value_type = typing.get_args(tp) or (str, object)
        if not isinstance(value, dict):
            raise src.error(path, f"expected a table, got {_describe(value)}")
        return types.MappingProxyType(
            {k: _convert(value_type, v, path + (k,), src, {}) for k, v in value.items()})
    if tp is object:
        return value
    if tp is float:
        if not _is_number(value):
            raise src.error(path, f"expected a number, got {_describe(value)}")
        if not math.isfinite(value):
            raise src.error(path, f"expected a finite number, got {_describe(value)}")
    if tp is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise src.error(path, f"expected an integer, got {_describe(value)}")
    least = meta.get("min")
    if least is not None and _is_number(value) and value < least:
        raise src.error(path, f"must be at least {least}, got {_describe(value)}")
    if tp in (str, bool) and not isinstance(value, tp):
        raise src.error(path, f"expected {_TYPE_WORDS[tp]}, got {_describe(value)}")
    choices = meta.get("choices")
    if choices and value not in choices:
        raise src.error(path, f"{value!r} is not one of: {', '.join(choices)}")
    pattern = meta.get("pattern")
    if pattern and isinstance(value, str) and not re.fullmatch(pattern, value):
        raise src.error(path, f"{value!r} does not match {meta.get('pattern_doc', pattern)}")
    return value


def field(doc: str, default=dataclasses.MISSING, **meta):
    """A schema field: `doc` feeds the generated schema docs; no default means the key is required."""
    metadata = {"doc": doc, **meta}
    if isinstance(default, dict):
        return dataclasses.field(default_factory=lambda: types.MappingProxyType(dict(default)), metadata=metadata)
    if isinstance(default, type):
        return dataclasses.field(default_factory=default, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def file_fields(cls) -> list:
    return [f for f in dataclasses.fields(cls) if f.metadata.get("file", True)]


def _named_tables(cls) -> dict:
    """{field: {table name: dataclass}} of `cls`'s fields that hold named tables: a field whose
    metadata's `tables` (a call) names the tables it holds, each a key of the file's own table,
    read into the field as {name: table} (absent ones at their defaults) and shown back in place."""
    return {f.name: f.metadata["tables"]() for f in dataclasses.fields(cls) if "tables" in f.metadata}


def build(cls, raw: dict, src: Source, path: tuple = (), **extra):
    """An instance of dataclass `cls` from the TOML table `raw`, or a UsageError for the first mistake."""
    hints = typing.get_type_hints(cls)
    allowed = {f.name: f for f in file_fields(cls)}
    named = _named_tables(cls)
    keys = set(allowed).union(*named.values())
    for key in raw:
        if key not in keys:
            raise src.error(path + (key,), f"unknown key (allowed here: {', '.join(sorted(keys))})")
    values = dict(extra)
    for field, tables in named.items():
        values[field] = types.MappingProxyType({name: _convert(table, raw[name], path + (name,), src, {}) if name in raw
                                                else table() for name, table in tables.items()})
    for name, f in allowed.items():
        if name in raw:
            values[name] = _convert(hints[name], raw[name], path + (name,), src, f.metadata)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise src.error(path + (name,), "required key is missing", at=path)
    return cls(**values)


def plain(value):
    """A loaded dataclass tree as JSON-ready dicts and lists (read-only mappings included)."""
    if dataclasses.is_dataclass(value):
        out = {}
        for f in dataclasses.fields(value):
            if "tables" in f.metadata:  # named tables stand in the table that holds them, as in its file
                out.update(plain(getattr(value, f.name)))
            else:
                out[f.name] = plain(getattr(value, f.name))
        return out
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def schema_rows(cls, prefix: str = ""):
    """(key, type, required, doc) rows describing `cls` and its nested tables, for docs."""
    hints = typing.get_type_hints(cls)
    for f in file_fields(cls):
        tp, key = hints[f.name], f"{prefix}{f.name}"
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        inner = typing.get_args(tp)[0] if typing.get_origin(tp) is tuple else tp
        if dataclasses.is_dataclass(inner):
            label = "array of tables" if inner is not tp else "table"
            yield key, label, required, f.metadata.get("doc", "")
            yield from schema_rows(inner, f"{key}{'[]' if inner is not tp else ''}.")
            continue
        yield key, _type_name(tp, f.metadata), required, f.metadata.get("doc", "")
    for tables in _named_tables(cls).values():
        for name, table in tables.items():
            yield f"{prefix}{name}", "table", False, (table.__doc__ or "").strip()
            yield from schema_rows(table, f"{prefix}{name}.")


def _type_name(tp, meta) -> str:
    if meta.get("choices"):
        return " \\| ".join(str(c) if c != "" else '""' for c in meta["choices"])
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a, {}) for a in typing.get_args(tp) if a is not type(None))
    if origin is tuple:
        return f"array of {_type_name(typing.get_args(tp)[0], {})}"
    if origin in (Mapping, dict):
        return f"table of {_type_name(typing.get_args(tp)[1], {})}"
    return {str: "string", int: "integer", float: "number", bool: "bool"}.get(tp, getattr(tp, "__name__", str(tp)))
