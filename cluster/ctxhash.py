#!/usr/bin/env python3
"""Content hash of a Docker build: Dockerfile + build args + every context file not excluded by
.dockerignore (Docker's rules: patterns relative to the context, `*`, `?`, `**`, `!` exceptions, last
match wins, an excluded directory excludes what is under it). Stdlib only.

    ctxhash.py DOCKERFILE CONTEXT [EXTRA ...]   -> prints a sha256 hex digest
"""
import hashlib
import os
import re
import stat
import sys


def _compile(pattern: str) -> re.Pattern:
    p = os.path.normpath(pattern.strip().lstrip("/"))
    out, i = "", 0
    while i < len(p):
        if p.startswith("**", i):
            out += ".*"
            i += 2
            if i < len(p) and p[i] == "/":
                out = out[:-2] + "(?:.*/)?"
                i += 1
            continue
        c = p[i]
        out += "[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c)
        i += 1
    return re.compile(out + "(?:/.*)?$")  # a match on a directory covers its contents


def may_reinclude(rel_dir: str, rules: list[tuple[bool, re.Pattern, str]]) -> bool:
    """Could a `!pattern` re-include something under the excluded directory rel_dir?"""
    for neg, _, raw in rules:
        if not neg:
            continue
        literal = re.split(r"[*?\[]", raw, maxsplit=1)[0]  # the part before the first wildcard
        if literal == raw:  # no wildcard: a plain path
            if raw == rel_dir or raw.startswith(rel_dir + "/"):
                return True
        elif literal.startswith(rel_dir + "/") or (rel_dir + "/").startswith(literal):
            return True
    return False


def load_ignore(context: str) -> list[tuple[bool, re.Pattern, str]]:
    rules = []
    for name in (".dockerignore", ".containerignore"):
        path = os.path.join(context, name)
        if os.path.exists(path):
            with open(path) as f:
                for line in f:
                    line = line.strip()
                    if not line or line.startswith("#"):
                        continue
                    neg = line.startswith("!")
                    pat = line[1:] if neg else line
                    rules.append((neg, _compile(pat), os.path.normpath(pat.strip().lstrip("/"))))
            break
    return rules


def excluded(rel: str, rules: list[tuple[bool, re.Pattern, str]]) -> bool:
    result = False
    for neg, rx, _ in rules:
        if rx.match(rel):
            result = not neg
    return result


def main(argv: list[str]) -> int:
    dockerfile, context, extra = argv[0], argv[1], argv[2:]
    rules = load_ignore(context)
    h = hashlib.sha256()
    with open(dockerfile, "rb") as f:
        h.update(b"dockerfile\0" + f.read() + b"\0")
    for e in extra:
        h.update(b"extra\0" + e.encode() + b"\0")
    for root, dirs, files in os.walk(context):
        dirs.sort()
        rel_root = os.path.relpath(root, context)
        for name in sorted(files):
            rel = os.path.normpath(os.path.join(rel_root, name))
            if excluded(rel, rules):
                continue
            full = os.path.join(root, name)
            st = os.lstat(full)
            h.update(rel.encode() + b"\0" + oct(stat.S_IMODE(st.st_mode)).encode() + b"\0")
            if stat.S_ISLNK(st.st_mode):
                h.update(b"link\0" + os.readlink(full).encode())
            elif stat.S_ISREG(st.st_mode):
                with open(full, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
            h.update(b"\0")
        # directories excluded as a whole are not walked (Docker would not send them)
        kept = []
        for d in dirs:
            rel_d = os.path.normpath(os.path.join(rel_root, d))
            if not excluded(rel_d, rules) or may_reinclude(rel_d, rules):
                kept.append(d)
        dirs[:] = kept
    print(h.hexdigest())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
