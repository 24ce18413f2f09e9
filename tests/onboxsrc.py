"""What the on-box sources import: the names a module cannot run without."""

import ast


def needed_imports(source):
    """The top-level names of the absolute imports a module cannot run without: those outside a
    try block (gpu.py's `import pynvml` is tried, and NVML's absence is an answer of its own)."""
    tree = ast.parse(source)
    tried = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try):
            for inner in node.body:
                tried.update(id(n) for n in ast.walk(inner))
    out = set()
    for node in ast.walk(tree):
        if id(node) in tried:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            out.add(node.module.split(".")[0])
    return out
