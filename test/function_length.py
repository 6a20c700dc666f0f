#!/usr/bin/env python3
"""Fails when a function in src/ (or the folders given) runs over 80 lines, from its name to
its closing brace: CONTRIBUTING.md asks for short functions, fit() at most 60.

usage: function_length.py [FOLDER...]   (default: src, relative to the repository)
"""
import os
import re
import sys

LIMIT = 80
FIT_LIMIT = 60  # the training loop reads as set-up, loop, report on one screen
NOT_FUNCTIONS = re.compile(r"^(if|for|while|switch|catch|else|do|try|namespace|class|struct|"
                           r"enum|union|return|extern)\b")
FUNCTION_HEAD = re.compile(r"\)\s*((const|override|noexcept|final|mutable)\s*)*(->[^{};]*)?$|"
                           r"\)\s*:\s*[\w:]+[({]")  # a signature, or a constructor's init list


def code_only(text):
    """The source with comments, string and character literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) + len(m.group(1)) + 2
            out.append(' ""' + "\n" * text.count("\n", i, end))
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def long_functions(path):
    code = code_only(open(path, encoding="utf-8").read())
    found, stack = [], []  # stack: (is_function, head, first line) of each open brace
    head_start, line = 0, 1
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c in ";{}":
            if c == "{":
                text = code[head_start:i]
                head = re.sub(r"__attribute__\(\(.*?\)\)\s*", "", " ".join(text.split()))
                first = line - text.count("\n") + text[:len(text) - len(text.lstrip())].count("\n")
                is_function = bool(FUNCTION_HEAD.search(head)) and not NOT_FUNCTIONS.match(head) \
                    and not (stack and stack[-1][0])  # lambdas count toward their function
                stack.append((is_function, head, first))
            elif c == "}" and stack:
                is_function, head, first = stack.pop()
                name = re.sub(r"\(.*", "", head).split()[-1] if head else "?"
                limit = FIT_LIMIT if name == "fit" else LIMIT
                if is_function and line - first + 1 > limit:
                    found.append((path, first, name, line - first + 1, limit))
            head_start = i + 1
    return found


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    folders = sys.argv[1:] or [os.path.join(root, "src")]
    found, files = [], 0
    for folder in folders:
        for dirpath, _, names in os.walk(folder):
            for name in sorted(names):
                if name.endswith((".cpp", ".h")):
                    files += 1
                    found += long_functions(os.path.join(dirpath, name))
    for path, first, name, lines, limit in found:
        print(f"{os.path.relpath(path, root)}:{first}: {name} has {lines} lines (at most {limit})")
    print(f"function length: {len(found)} too long in {files} files")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
