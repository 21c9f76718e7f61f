#!/usr/bin/env python3
"""Every `ddpsim ...` and `ddptrain ...` command in a shell block (```sh) of README.md and docs/*.md
still parses. Each example's verb must exist and every option it passes must be one that the
verb's --help lists. Beyond that, where all the files an example names are in the repository:
`run`, `compare` and `balance` resolve their config with --print-config (so every --set key and
value is checked by the parser), and `sweep` runs with --dry-run (every cell checked, nothing
simulated). Every relative link of those pages and traces/README.md must lead to a file, and its
#anchor to a heading there. Usage: doc_examples.py DDPSIM SOURCE_DIR; DDPTRAIN beside DDPSIM is
optional."""
import os
import re
import shlex
import subprocess
import sys
import tempfile

DDPSIM, SRC = sys.argv[1], sys.argv[2]
DDPTRAIN = os.path.join(os.path.dirname(DDPSIM), "ddptrain")
FILE_ARG = re.compile(r"[\w./-]+\.(json|xml|tsv|txt|csv)$")
failures = []
help_cache = {}
resolved = []  # the examples also run through --print-config or --dry-run


def pages():
    yield "README.md"
    for name in sorted(os.listdir(os.path.join(SRC, "docs"))):
        if name.endswith(".md"):
            yield "docs/" + name


def open_quote(text):
    try:
        shlex.split(text, comments=True)
        return False
    except ValueError:
        return True


def examples(page):
    """(line number, command text) of each ddpsim/ddptrain command in the page's shell blocks
    (```sh); a command goes on over lines ending in a backslash or inside an open quote."""
    shell, fence, pending, start = False, False, "", 0
    with open(os.path.join(SRC, page), encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.startswith("```"):
                fence = not fence
                shell = fence and line.strip() in ("```sh", "```bash")
                continue
            if not shell:
                continue
            text = line.rstrip("\n")
            if pending:
                pending += ("\n" if open_quote(pending) else " ") + text.strip()
            elif re.search(r"(^|[\s/])(ddpsim|ddptrain) ", text) and not text.lstrip().startswith("#"):
                pending, start = text.strip(), number
            else:
                continue
            if pending.endswith("\\"):
                pending = pending[:-1]
                continue
            if open_quote(pending):
                continue
            yield start, pending
            pending = ""


def help_text(binary, verb):
    key = (binary, verb)
    if key not in help_cache:
        argv = [binary] + ([verb] if verb else []) + ["--help"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        help_cache[key] = done.stdout if done.returncode == 0 else None
    return help_cache[key]


def check(page, number, command):
    where = "%s:%d: %s" % (page, number, command)
    try:
        words = shlex.split(command, comments=True)
    except ValueError as e:
        failures.append("%s: not shell syntax (%s)" % (where, e))
        return
    at = next((i for i, w in enumerate(words) if re.search(r"(^|/)(ddpsim|ddptrain)$", w)), None)
    if at is None:
        return  # the name inside another command's text (a comment, a script's argument)
    tool, args = os.path.basename(words[at]), [w for w in words[at + 1:] if w != "..."]
    args = args[: next((i for i, w in enumerate(args) if w in ("|", "&&", ";", ">", "2>")), len(args))]
    binary = DDPSIM if tool == "ddpsim" else DDPTRAIN
    if not os.access(binary, os.X_OK):
        return  # a build without the trainer
    verb = args[0] if tool == "ddpsim" and args and not args[0].startswith("-") else ""
    text = help_text(binary, verb)
    if text is None:
        failures.append("%s: `%s %s --help` fails: no such command" % (where, tool, verb))
        return
    for word in args:
        if word.startswith("--"):
            option = word.split("=", 1)[0]
            if not re.search(r"(^|[\s,\[])%s([\s=,\]]|$)" % re.escape(option), text, re.M):
                failures.append("%s: %s is not an option of `%s %s`" % (where, option, tool, verb))
    files = [w.split("=", 1)[-1] for w in args if FILE_ARG.search(w.split("=", 1)[-1])]
    if tool != "ddpsim" or not all(os.path.isfile(os.path.join(SRC, f)) for f in files):
        return
    with tempfile.TemporaryDirectory() as tmp:
        rest = []
        skip = False
        for w in args[1:]:
            if skip:
                skip = False
            elif w in ("--out", "--timeline", "--link-series", "--link-bin", "--replicates", "--jobs"):
                skip = True  # outputs and repetitions: not what parsing checks
            else:
                rest.append(w)
        if verb in ("run", "compare", "balance"):
            argv = [DDPSIM, verb] + rest + ["--print-config"]
        elif verb == "sweep" and "--merge" not in rest:
            argv = [DDPSIM, verb] + rest + ["--dry-run", "--out", os.path.join(tmp, "out")]
        else:
            return
        resolved.append(where)
        done = subprocess.run(argv, cwd=SRC, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            failures.append("%s: `%s` exits %d: %s" % (where, " ".join(argv[1:]), done.returncode,
                                                       done.stderr.strip()[:300]))


def anchors(path):
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    out, fence = set(), False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                fence = not fence
            heading = re.match(r"#+ (.*)", line)
            if heading and not fence:
                out.add(re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-"))
    return out


def check_links(page):
    path = os.path.join(SRC, page)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue  # an address outside the repository
        name, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(path), name)) if name else path
        if not os.path.exists(resolved):
            failures.append("%s: link to %s: no such file" % (page, target))
        elif anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
            failures.append("%s: link to %s: no such heading" % (page, target))


for page in list(pages()) + ["traces/README.md"]:
    check_links(page)
count = 0
for page in pages():
    for number, command in examples(page):
        count += 1
        check(page, number, command)
if count < 20 or len(resolved) < 5:
    failures.append("only %d examples found, %d resolved: the extraction is broken" % (count, len(resolved)))
for f in failures:
    print("FAIL: " + f, file=sys.stderr)
print("%d examples checked against --help, %d of them resolved by --print-config or --dry-run; %d failures"
      % (count, len(resolved), len(failures)))
sys.exit(1 if failures else 0)
