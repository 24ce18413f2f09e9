"""Fit an envelope into what an agent's client will show it, and say what was cut.

Clients truncate or spill big tool results to files the model seldom opens (Claude Code
spills text over ~50k characters), so every result is cut here first, in a known order:
long strings keep their tail (the end of a log or traceback is where the failure is), then
lists keep their head (ops order them worst- or newest-first), then whole `data` keys go,
biggest first. `summary`, `ok` and `error` are never cut. What went is listed under
`truncated`, so the model never has to guess whether it saw everything.
"""

import json

LIMIT_CHARS = 40_000
STRING_CHARS = 4_000
_LIST_STEPS = (50, 20, 10, 5, 2, 0)
_KEEP = ("summary", "ok", "error", "schema_version", "command", "host")


def compact(doc) -> str:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False, default=str)


def summary_first(doc) -> dict:
    """The same document with `summary` then `ok` leading, whichever channel a client shows."""
    head = {k: doc[k] for k in ("summary", "ok") if k in doc}
    return dict(head, **{k: v for k, v in doc.items() if k not in head})


def tail_text(text: str, chars: int):
    """(kept tail, number of characters cut from the front)."""
    if len(text) <= chars:
        return text, 0
    return text[len(text) - chars:], len(text) - chars


def bound(doc, limit: int = LIMIT_CHARS) -> dict:
    """`doc` (summary first) whose compact JSON is at most about `limit` characters."""
    doc = summary_first(json.loads(compact(doc)))  # a private deep copy, JSON types only
    size = len(compact(doc))
    if size <= limit:
        return doc
    cut = {}  # path -> what was cut there; a list cut twice keeps one entry
    body = {k: v for k, v in doc.items() if k not in _KEEP}
    _shorten_strings(body, "", cut)
    lengths = {}  # path -> a list's length before any cut
    for most in _LIST_STEPS:
        if _size(doc, body, cut) <= limit:
            break
        _shorten_lists(body, "", most, cut, lengths)
    data = body.get("data")
    while isinstance(data, dict) and data and _size(doc, body, cut) > limit:
        key = max(data, key=lambda k: len(compact(data[k])))
        del data[key]
        cut[f"data.{key}"] = "dropped"
    doc.update(body)
    doc["truncated"] = {"chars": size, "limit": limit, "cut": _listed(cut)}
    return doc


def _listed(cut, most=20):
    lines = [f"{k}: {v}" for k, v in cut.items()]
    return lines[:most] + ([f"and {len(lines) - most} more cuts"] if len(lines) > most else [])


def _size(doc, body, cut):
    return len(compact(dict(doc, **body))) + len(compact(_listed(cut))) + 60


def _shorten_strings(node, path, cut) -> None:
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for key, value in list(items):
        where = f"{path}.{key}" if path else str(key)
        if isinstance(value, str) and len(value) > STRING_CHARS:
            kept, gone = tail_text(value, STRING_CHARS)
            node[key] = f"[{gone} chars cut] " + kept
            cut[where] = f"first {gone} of {len(value)} chars"
        elif isinstance(value, (dict, list)):
            _shorten_strings(value, where, cut)


def _shorten_lists(node, path, most, cut, lengths) -> None:
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for key, value in list(items):
        where = f"{path}.{key}" if path else str(key)
        if isinstance(value, list) and len(value) > most:
            total = lengths.setdefault(where, len(value))
            cut[where] = f"kept {most} of {total} items"
            del value[most:]
        if isinstance(value, (dict, list)):
            _shorten_lists(value, where, most, cut, lengths)


def lean_schema(schema: dict, inputs=True) -> dict:
    """A JSON schema without pydantic's generated titles; for `inputs`, optional arguments as
    their plain type.

    Every tools/list entry is read by the model on every turn; titles repeat the property
    names, and for an argument `anyOf [T, null]` only says "may be omitted", which `required`
    already says (calls validate on the full model, so a null sent anyway still passes). An
    output schema keeps its nulls: clients validate results against it. An enum's values say
    their type.
    """
    out = {k: v for k, v in schema.items() if k != "title" and not (k == "type" and "enum" in schema)}
    options = out.get("anyOf")
    if inputs and isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        del out["anyOf"]
        out = dict(lean_schema(next(o for o in options if o != {"type": "null"})), **out)
    if isinstance(out.get("properties"), dict):
        out["properties"] = {name: lean_schema(s, inputs) for name, s in out["properties"].items()}
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = lean_schema(out[key], inputs)
    if isinstance(out.get("anyOf"), list):
        out["anyOf"] = [lean_schema(o, inputs) for o in out["anyOf"]]
    return out
