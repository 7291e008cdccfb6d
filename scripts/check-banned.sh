#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Reports calls to banned C functions in src/ and tests/ (*.c, *.h) as file:line and
# exits 1 if there are any. Comments and string/character literals are ignored, and
# only whole identifiers followed by "(" count (xfree( and ops->free( do not).
# Raw allocation (malloc and friends) is allowed only in src/common/xalloc.c.
set -euo pipefail
cd "$(dirname "$0")/.."

exec python3 - "$@" <<'PY'
import os
import re
import sys

ALLOC = ["malloc", "calloc", "realloc", "reallocarray", "free", "strdup", "strndup",
         "asprintf", "vasprintf"]
ALWAYS = ["strcpy", "strcat", "strncpy", "sprintf", "vsprintf", "strtok", "atoi", "atol",
          "atof", "gets"]
ALLOC_OK = {"src/common/xalloc.c"}


def pattern(names):
    # A whole identifier, not a member (.x / ->x), followed by "(".
    return re.compile(r"(?<![\w.])(?<!->)(" + "|".join(names) + r")\s*\(")


def strip(text):
    """Blanks out comments and string/char literals, keeping newlines (line numbers)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j - 1]) + c)
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def files(roots):
    for root in roots:
        for d, dirs, names in os.walk(root):
            dirs.sort()
            for name in sorted(names):
                if name.endswith((".c", ".h")):
                    yield os.path.join(d, name)


def main():
    roots = sys.argv[1:] or ["src", "tests"]
    always, alloc = pattern(ALWAYS), pattern(ALLOC)
    bad = 0
    for path in files(roots):
        with open(path, encoding="utf-8", errors="replace") as f:
            code = strip(f.read())
        for lineno, line in enumerate(code.split("\n"), 1):
            found = [m.group(1) for m in always.finditer(line)]
            if os.path.normpath(path) not in ALLOC_OK:
                found += [m.group(1) for m in alloc.finditer(line)]
            for name in found:
                print(f"{path}:{lineno}: banned call {name}()")
                bad += 1
    if bad:
        print(f"check-banned: {bad} banned call(s)", file=sys.stderr)
        return 1
    return 0


sys.exit(main())
PY
