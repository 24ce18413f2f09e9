"""Whether words added to the end of a bash command line reach its program: the rule that lets a
run's --resume-arg be appended to --cmd, or refuses it at launch (the user then puts {checkpoint}
in --cmd where the argument goes).

Appending works when the command's last line is one simple command: `python3 train.py --lr 3e-4`,
`cd /x \\n torchrun ... train.py`, redirections included (`python3 train.py > out.log` takes words
after the redirection). It does not when the words would land

  * in a comment:                    python3 train.py  # sweep 3
  * on another command of the line:  ... | tee out.log, ... ; echo done, ... && rm x, ... || true,
                                     ... &, ( ... ), a here-document (python3 - <<EOF ... EOF)
  * after a keyword that closes a compound command: fi, done, esac, }, )

Quotes, escapes, $(...), `...` and <(...) are followed so that a `#`, `|` or `;` inside them is
not taken for one of the line's own. Pure: text in, a reason or None out.
"""

_RESERVED_END = ("fi", "done", "esac", "}", ")", "then", "do", "else", "in")


def problem(text: str):
    """Why words appended to `text` would not reach its last command's program, or None."""
    text = text.rstrip()
    if not text:
        return "the command is empty"
    found, depth, quote, i, word_start = None, 0, None, 0, True
    while i < len(text):
        c = text[i]
        nxt = text[i + 1] if i + 1 < len(text) else ""
        prev = text[i - 1] if i else " "
        if quote == "'":
            quote = None if c == "'" else quote
        elif c == "\\":
            i += 2
            word_start = False
            continue
        elif quote == '"':
            if c == '"':
                quote = None
            elif c == "$" and nxt == "(":
                depth, i = depth + 1, i + 1
            elif c == ")" and depth:
                depth -= 1
        elif c in "'\"":
            quote = c
        elif c == "`":
            quote = None
            end = text.find("`", i + 1)
            i = len(text) if end < 0 else end
        elif c == "(" and (prev in "$<>" or depth):
            depth += 1
        elif c == ")" and depth:
            depth -= 1
        elif depth:
            pass
        elif c == "\n":
            found = None  # a new line: appended words land on the last one only
        elif c == "#" and word_start:
            found = found or "it ends in a comment (the words would be part of it)"
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif c == "<" and nxt == "<" and text[i + 2:i + 3] != "<":
            return "it holds a here-document"
        elif c == "|" and prev != ">":
            found = "it has a pipe: the words would go to the command after it"
        elif c == ";":
            found = "it has a ';': the words would go to the command after it"
        elif c == "&" and prev not in "<>" and nxt != ">":
            found = "it has '&' or '&&': the words would go to the command after it"
        elif c in "()":
            found = "it has a subshell ( ... ): the words would land outside it"
        word_start = c in " \t\n;&|()<>"
        i += 1
    if quote or depth:
        return "its quotes or parentheses are not closed"
    last = text.splitlines()[-1].split()
    if found is None and last and last[0] in _RESERVED_END:
        found = "its last line closes a compound command (%s)" % last[0]
    return found
