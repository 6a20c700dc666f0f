#!/usr/bin/env python3
"""The help texts of the pitrain binary: whole, with value names, and listing every flag the docs use.

Runs `pitrain --version`, `pitrain --help` and `pitrain <command> --help` for every command that
`pitrain --help` lists, and fails on:
  - a version line other than "pitrain <meson.build's project version> (rev <revision>, <build
    type>, -D<option>=<value> for every option of meson_options.txt; GEMM on this CPU: <kernel>)",
    or a non-zero exit; in a git checkout, a revision other than HEAD's short hash (with
    "-modified" or not), elsewhere other than "unknown" or .pitrain-revision's;
  - a usage line other than "pitrain <command> ... [OPTION...] ...";
  - a cut-off description: a line of spaces alone (cxxopts 3.1's wrapping drops a one-letter last
    word and leaves one), an option whose description is empty, ends in a word that cannot end a
    phrase ("by", "the", "a", "of", "to", "and", "or", ...) or in ",;:(-/", or leaves a
    parenthesis, backquote or double quote unclosed; the same for each command's description
    and each line of `pitrain --help`'s list of commands;
  - a page of the source tree (a path ending in .md) that a help text names but that is missing;
  - a flag that takes a value without a value name (cxxopts prints "arg" for those);
  - a flag that README.md or docs/**/*.md names for a command which that command's --help does
    not list. A flag counts as named for `pitrain <command>` when it follows those words on the
    same command line (through `\\` continuations), before a closing backquote, a table's "|",
    ";", "&&", a shell comment, an MPMD " : " or the next `pitrain <command>`; quoted strings
    (--mpirun-args "...") are left out, and in `pitrain elastic ... -- train ...` the flags after
    `-- train` are train's. Flags before `pitrain` (mpirun's, ssh's) are not looked at. The
    examples at the end of a command's --help are checked the same way.
Needs $PITRAIN (the binary) and $PITRAIN_SOURCE (the source folder whose docs are read); meson sets both.
"""
import glob
import os
import re
import subprocess
import sys

PITRAIN = os.environ["PITRAIN"]
SOURCE = os.environ.get("PITRAIN_SOURCE") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

# Words after which a phrase cannot end: a description ending in one was cut off.
DANGLING = set("""a an the of to and or nor but by with without for from in into on at as than that which
whose when where if its their each every per is are be this these""".split())
failures = []


def fail(message):
    failures.append(message)
    print("FAIL: " + message)


def run(*args):
    p = subprocess.run([PITRAIN, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        fail(f"`pitrain {' '.join(args)}` exited {p.returncode}: {p.stderr.strip()}")
    return p.stdout


def check_whole(where, text):
    """Fails unless `text` (one description, lines joined) ends as a phrase and closes what it opens."""
    text = " ".join(text.split())
    if not text:
        return fail(f"{where}: empty description")
    last = re.sub(r"[^\w-]+$", "", text).rsplit(" ", 1)[-1].lower()
    if text[-1] in ",;:(-/" or last in DANGLING:
        fail(f"{where}: cut off: ...{text[-50:]!r}")
    if text.count("(") != text.count(")") or text.count("`") % 2 or text.count('"') % 2:
        fail(f"{where}: an unclosed parenthesis or quote: {text!r}")


def check_lines(where, lines):
    """Fails on lines of spaces alone and on pages named that are missing."""
    for page in sorted(set(re.findall(r"[\w./-]+\.md\b", "\n".join(lines)))):
        if not os.path.exists(os.path.join(SOURCE, page)):
            fail(f"{where}: names {page}, which the source tree does not hold")
    for i, line in enumerate(lines):
        if line and not line.strip():
            fail(f"{where}: line {i + 1} holds spaces alone (a description cut off by cxxopts' wrapping; "
                 f"the line before: {lines[i - 1].strip()!r})")


OPTION = re.compile(r"^  (?:-\w, |    )--([a-z0-9][a-z0-9-]*)(\s\S+)?(?:  +(\S.*))?$")


def parse_help(command, text):
    """The long flags of one command's --help, checking the text on the way; and its examples."""
    lines = text.split("\n")
    where = f"pitrain {command} --help"
    check_lines(where, lines)
    if "Usage:" not in lines:
        fail(f"{where}: no Usage: line")
        return set(), ""
    u = lines.index("Usage:")
    check_whole(f"{where}: the description", " ".join(lines[:u]))
    usage = lines[u + 1] if u + 1 < len(lines) else ""
    if not re.match(rf"^  pitrain {command} (.* )?\[OPTION\.\.\.\]( |$)", usage):
        fail(f"{where}: usage line {usage!r}, expected 'pitrain {command} [OPTION...]'")
    body = lines[u + 2:]
    examples = ""
    if "Examples:" in body:
        e = body.index("Examples:")
        body, examples = body[:e], "\n".join(body[e + 1:])
    flags, entries = set(), []  # entries: [flag, description parts]
    for line in body:
        if not line.strip() or re.match(r"^ \S.* options:$", line):  # between groups, a group's title
            continue
        m = OPTION.match(line)
        if m:
            flag, value, desc = m.groups()
            flags.add(flag)
            if value and re.fullmatch(r"\s(arg|\[=arg.*)", value):
                fail(f"{where}: --{flag} takes a value without a value name (cxxopts prints 'arg')")
            entries.append([flag, [desc or ""]])
        elif line.startswith("      ") and entries:
            entries[-1][1].append(line)
        else:
            fail(f"{where}: a line that is neither an option nor its description: {line!r}")
    for flag, parts in entries:
        desc = re.sub(r"\s*\(default:[^()]*\)\s*$", "", " ".join(" ".join(parts).split()))
        check_whole(f"{where}: --{flag}", desc)
    return flags, examples


def logical_lines(text):
    """(line number, line) with `\\` continuations joined."""
    out, pending, start = [], "", 0
    for n, line in enumerate(text.split("\n"), 1):
        if not pending:
            start = n
        stripped = line.rstrip()
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        out.append((start, pending + line))
        pending = ""
    if pending:
        out.append((start, pending))
    return out


def check_doc(where, text, flags):
    """Fails for each flag that `text` names after `pitrain <command>` and that command's help leaves out.
    Returns how many it looked at."""
    commands = "|".join(map(re.escape, sorted(flags)))
    invocation = re.compile(rf"(?:^|(?<=[\s`/(\[]))pitrain\s+({commands})(?=[\s`]|$)")
    quoted = re.compile(r"\"[^\"]*\"|(?:^|(?<=[\s=]))'[^']*'")
    end = re.compile(r"`|\||;|&&|\s#|\s:\s")
    flag = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]*)")
    seen = 0
    for n, line in logical_lines(text):
        found = list(invocation.finditer(line))
        for i, m in enumerate(found):
            segment = line[m.end():found[i + 1].start() if i + 1 < len(found) else len(line)]
            segment = quoted.sub(" ", segment)
            segment = end.split(segment, 1)[0]
            parts = [(m.group(1), segment)]
            if m.group(1) == "elastic":  # pitrain elastic [its flags] -- train [train's flags]
                split = re.split(r"\s--\s+train(?=\s|$)", segment, 1)
                parts = [("elastic", split[0])] + ([("train", split[1])] if len(split) > 1 else [])
            for command, words in parts:
                for f in flag.findall(words):
                    seen += 1
                    if f not in flags[command]:
                        fail(f"{where}:{n}: `pitrain {command} ... --{f}`, "
                             f"but `pitrain {command} --help` does not list --{f}")
    return seen


# The source revision src/cli/revision.sh gives now: the build's unless the tree changed since.
def revision_now():
    script = os.path.join(SOURCE, "src", "cli", "revision.sh")
    return subprocess.run(["sh", script], capture_output=True, text=True).stdout.strip()


# `pitrain --version` and `pitrain version`: the version, the revision, the build type and every
# option of meson_options.txt, then the GEMM kernel.
def check_version(version):
    options = re.findall(r"option\('([a-z_]+)'", open(os.path.join(SOURCE, "meson_options.txt")).read())
    line = re.compile(rf"pitrain {re.escape(version)} \(rev ([A-Za-z0-9.-]+), "
                      rf"([a-z]+), ([^;\n]*); GEMM on this CPU: [^)\n]+\)\n")
    for args in (["--version"], ["version"]):
        out = run(*args)
        m = line.fullmatch(out)
        if not m:
            fail(f"`pitrain {args[0]}` printed {out!r}, expected one line 'pitrain {version} (rev REVISION, "
                 f"BUILDTYPE, -DOPTION=VALUE...; GEMM on this CPU: KERNEL)'")
            continue
        missing = [o for o in options if not re.search(rf"(^| )-D{o}=\S", m.group(3))]
        if missing:
            fail(f"`pitrain {args[0]}` names no -D{missing[0]}=...: add each option of meson_options.txt "
                 f"to build_options in meson.build")
        # The build ran revision.sh; now it may say -modified where the build did not, or the reverse.
        if m.group(1).split("-")[0] != revision_now().split("-")[0]:
            fail(f"`pitrain {args[0]}` says rev {m.group(1)}, but the source is at {revision_now()}: "
                 f"rebuild, or check src/cli/revision.sh and meson.build's vcs_tag")
    print(f"ok: pitrain --version: {out.strip()}")


def main():
    meson = open(os.path.join(SOURCE, "meson.build")).read()
    version = re.search(r"project\([^)]*?version\s*:\s*'([^']+)'", meson, re.S).group(1)
    check_version(version)

    top = run("--help")
    lines = top.split("\n")
    check_lines("pitrain --help", lines)
    listed = lines[lines.index("commands:") + 1:] if "commands:" in lines else []
    commands = [m for m in (re.match(r"^  ([a-z]+)  +(\S.*)$", line) for line in listed) if m]
    if not commands:
        fail("pitrain --help lists no commands under 'commands:'")
    for m in commands:
        check_whole(f"pitrain --help: {m.group(1)}", m.group(2))

    flags, examples = {}, {}
    for m in commands:
        command = m.group(1)
        flags[command], examples[command] = parse_help(command, run(command, "--help"))
        print(f"ok: pitrain {command} --help: {len(flags[command])} flags")
    for command, text in examples.items():
        check_doc(f"pitrain {command} --help's examples", text, flags)

    readme = os.path.join(SOURCE, "README.md")
    docs = [readme] + sorted(glob.glob(os.path.join(SOURCE, "docs", "**", "*.md"), recursive=True))
    if not os.path.exists(readme):
        fail(f"{readme}: missing")
        docs = docs[1:]
    for path in docs:
        seen = check_doc(os.path.relpath(path, SOURCE), open(path, encoding="utf-8").read(), flags)
        print(f"ok: {os.path.relpath(path, SOURCE)}: {seen} flags after `pitrain <command>` looked up")
        if path == readme and seen == 0:
            fail("README.md: no flag after `pitrain <command>` found: the test would check nothing")

    print(f"help: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
