"""Coding agents doing real work (Claude Code, Codex, aider): every run teaches them something."""

from __future__ import annotations

import random

from ..stalls import Script
from . import noise
from .toolout import (build_cmd, build_ok, build_output, code_line, compiler_line, edit_result, lint_output, new_error,
                      new_lint, pytest_output, read_output)
from .trace import Trial, healthy, pick, tail
from .words import NOUNS, PACKAGES_NPM, PACKAGES_PY, PROJECTS, Names


def _setup(rng: random.Random) -> tuple[Trial, str, str, int]:
    t = Trial(rng)
    return t, rng.choice(PROJECTS), noise.home(rng), rng.randrange(3)


def _assertion(rng: random.Random, names: Names) -> str:
    a, b = names.ident(), names.ident()
    return rng.choice((f"assert {a}(payload) == expected | AssertionError: assert {{'{b}': None}} == {{'{b}': 3}}",
                       f"assert result.{a} is not None | AssertionError: assert None is not None",
                       f"assert len({a}) == 2 | AssertionError: assert 0 == 2",
                       f"{a}(conn, '{b}') | KeyError: '{b}'",
                       f"assert {a}.status == 200 | AssertionError: assert 500 == 200"))


@healthy
def tdd_failures_shrink(rng: random.Random, actions: bool) -> Script:
    """Fix failing tests one by one: read the failure, edit, rerun; different tests fail each time."""
    t, project, home, style = _setup(rng)
    lang = "py"
    failing = [(f"tests/test_{rng.choice(NOUNS)}.py", t.names.test(), _assertion(rng, t.names), rng.randint(10, 300))
               for _ in range(rng.randint(3, 7))]
    passed = rng.randint(40, 600)
    cmd = pick(rng, "pytest -q", "python -m pytest", "pytest -x", "uv run pytest", "pytest tests/")
    t.emit(cmd, pytest_output(t, project=project, home=home, failures=failing, passed=passed,
                              secs=rng.uniform(2, 60), plugins=rng.random() < 0.5, seed=None))
    while failing:
        f, test, _, lineno = failing[0]
        t.emit(f"sed -n '{lineno - 8},{lineno + 8}p' {f}", read_output(rng, t.names, lang, lineno - 8, 16, style), tool="read")
        src = t.names.module("py")
        t.emit(f"grep -n 'def ' {src}", "\n".join(f"{rng.randint(1, 400)}:def {t.names.ident()}(" for _ in range(rng.randint(2, 6))))
        line = rng.randint(10, 300)
        t.emit(f"edit {src}:{line}", edit_result(t, src, line, rng.randint(1, 9), rng.randint(0, 5), style, f"{home}/{project}"),
               tool="edit")
        fixed = rng.randint(1, min(2, len(failing)))
        passed += fixed
        failing = failing[fixed:]
        if rng.random() < 0.25:  # a fix uncovers another failure
            failing.append((f"tests/test_{rng.choice(NOUNS)}.py", t.names.test(), _assertion(rng, t.names), rng.randint(10, 300)))
        if rng.random() < 0.3:
            t.advance(t.long(0.1, 0.3))
        t.emit(cmd, pytest_output(t, project=project, home=home, failures=failing, passed=passed,
                                  secs=rng.uniform(2, 60), plugins=rng.random() < 0.5, seed=None))
    return t.script(actions)


@healthy
def refactor_rename(rng: random.Random, actions: bool) -> Script:
    """Rename a symbol across the repository, file by file, counting the files done."""
    t, project, home, style = _setup(rng)
    old, new = t.names.camel(), t.names.camel()
    ext = pick(rng, "ts", "py", "go")
    files = [t.names.module(ext) for _ in range(rng.randint(8, 26))]
    hits = {f: sorted(rng.sample(range(5, 400), rng.randint(1, 5))) for f in files}
    fm = rng.randrange(2)
    t.emit(f"rg -n '{old}' --type {ext}", "\n".join(f"{f}:{ln}:    {old}(" for f in files for ln in hits[f]), tool="grep")
    for i, f in enumerate(files):
        lines = hits[f]
        out = (f"Replaced {len(lines)} occurrence(s) of {old} with {new} in {f} (lines {', '.join(map(str, lines))})"
               if fm else edit_result(t, f, lines[0], len(lines), len(lines), style, f"{home}/{project}"))
        t.emit(f"edit {f}: {old} -> {new}", out, tool="edit", units=(i + 1, len(files)))
        if rng.random() < 0.2:
            left = files[i + 1:]
            t.emit(f"rg -c '{old}'", "\n".join(f"{g}:{len(hits[g])}" for g in left) or "(no matches)", tool="grep",
                   units=(i + 1, len(files)))
    t.emit(build_cmd("ts" if ext == "ts" else "py", rng), build_ok(t, "ts" if ext == "ts" else "py", project, rng.uniform(3, 40)),
           units=(len(files), len(files)))
    return t.script(actions)


LICENSE = ("# Copyright {year} {org} Authors. All rights reserved.", "#",
           "# Licensed under the Apache License, Version 2.0 (the \"License\");",
           "# you may not use this file except in compliance with the License.", "# You may obtain a copy of the License at",
           "#", "#     http://www.apache.org/licenses/LICENSE-2.0", "#",
           "# Unless required by applicable law or agreed to in writing, software",
           "# distributed under the License is distributed on an \"AS IS\" BASIS,",
           "# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.",
           "# See the License for the specific language governing permissions and", "# limitations under the License.", "")


@healthy
def explore_boilerplate(rng: random.Random, actions: bool) -> Script:
    """Read file after file of a repo whose files all open with the same licence header."""
    t, project, home, style = _setup(rng)
    header = [h.format(year=rng.randint(2016, 2024), org=project.title()) for h in LICENSE]
    lang = pick(rng, "py", "go")
    if lang == "go":
        header = [h.replace("#", "//") for h in header] + ["package " + rng.choice(NOUNS), ""]
    for _ in range(rng.randint(14, 32)):
        if rng.random() < 0.2:
            d = t.names.module(lang).rsplit("/", 1)[0]
            t.emit(f"ls {d}", "\n".join(f"{t.names.ident()}.{lang}" for _ in range(rng.randint(3, 12))), tool="list")
            continue
        f = t.names.module(lang)
        t.emit(f"cat {f}" if rng.random() < 0.5 else f, read_output(rng, t.names, lang, 1, rng.randint(3, 10), style, header),
               tool="read")
    return t.script(actions)


@healthy
def build_errors_fixed(rng: random.Random, actions: bool) -> Script:
    """Compile, fix the first error, compile again: each build shows a different, shorter error list."""
    t, project, home, style = _setup(rng)
    lang = pick(rng, "ts", "rs", "go", "java", "py")
    cmd = build_cmd(lang, rng)
    npm10 = rng.random() < 0.5
    errors = [new_error(rng, t.names, lang) for _ in range(rng.randint(3, 9))]
    pos = {id(e): (rng.randint(5, 400), rng.randint(1, 40)) for e in errors}

    def build() -> None:
        rendered = [compiler_line(e, *pos[id(e)]) for e in errors]
        secs = rng.uniform(2, 90)
        t.emit(cmd, build_output(t, lang, cmd, rendered, project=project, secs=secs, home=home, npm10=npm10)
               if errors else build_ok(t, lang, project, secs) or "(no output)")

    build()
    while errors:
        e = errors.pop(0)
        line, _ = pos[id(e)]
        t.emit(f"view {e['path']}:{line}", read_output(rng, t.names, lang, max(1, line - 5), 10, style), tool="read")
        t.emit(f"edit {e['path']}", edit_result(t, e["path"], line, rng.randint(1, 4), rng.randint(0, 3), style, f"{home}/{project}"),
               tool="edit")
        if rng.random() < 0.2:
            extra = new_error(rng, t.names, lang)
            errors.append(extra)
            pos[id(extra)] = (rng.randint(5, 400), rng.randint(1, 40))
        build()
    return t.script(actions)


@healthy
def lint_cleanup(rng: random.Random, actions: bool) -> Script:
    """Clear a linter's findings file by file; each run lists fewer, and different, findings."""
    t, project, home, style = _setup(rng)
    tool = pick(rng, "eslint", "ruff")
    ext = "ts" if tool == "eslint" else "py"
    files = [t.names.module(ext) for _ in range(rng.randint(4, 10))]
    issues = {f: [new_lint(rng, t.names, tool, f) for _ in range(rng.randint(1, 5))] for f in files}
    cmd = "npx eslint src" if tool == "eslint" else pick(rng, "ruff check .", "ruff check src tests")
    root = f"{home}/{project}/"
    total = sum(len(v) for v in issues.values())
    done = 0
    t.emit(cmd, lint_output(t, tool, [i for v in issues.values() for i in v], root))
    for f in files:
        t.emit(f"edit {f}", edit_result(t, f, issues[f][0][1], 1, 1, style, root), tool="edit")
        done += len(issues.pop(f))
        rest = [i for v in issues.values() for i in v]
        t.emit(cmd, lint_output(t, tool, rest, root) if rest else pick(rng, "All checks passed!", "✨  Done, no problems."),
               units=(done, total))
    return t.script(actions)


@healthy
def long_test_suite(rng: random.Random, actions: bool) -> Script:
    """Run slow integration suites module by module: long quiet calls, each with its own results."""
    t, project, home, style = _setup(rng)
    keeper = rng.random() < 0.5
    mods = [f"tests/integration/test_{t.names.pick(NOUNS)}.py" for _ in range(rng.randint(5, 10))]
    for i, m in enumerate(mods):
        t.emit(f"git diff --stat HEAD~1 -- {m}", f" {m} | {rng.randint(1, 80)} {'+' * rng.randint(1, 20)}{'-' * rng.randint(0, 9)}\n"
               f" 1 file changed, {rng.randint(1, 60)} insertions(+), {rng.randint(0, 20)} deletions(-)", units=(i, len(mods)))
        secs = t.long(0.15, 0.4) if not keeper else rng.uniform(0.6, 2.5) * t.lease
        if keeper:
            t.keeper(secs)
        else:
            t.advance(secs)
        fails = [(m, t.names.test(), _assertion(rng, t.names), rng.randint(10, 300))] if rng.random() < 0.3 else []
        t.emit(f"pytest {m} -q", pytest_output(t, project=project, home=home, failures=fails, passed=rng.randint(8, 120),
                                                secs=secs, plugins=False, seed=None, verbose_header=False),
               units=(i + 1, len(mods)))
    return t.script(actions)


@healthy
def git_commit_series(rng: random.Random, actions: bool) -> Script:
    """Stage, commit and push a series of changes, then open the pull request."""
    t, project, home, style = _setup(rng)
    branch = f"{pick(rng, 'fix', 'feat', 'chore')}/{t.names.slug()}"
    t.emit(f"git checkout -b {branch}", f"Switched to a new branch '{branch}'", tool="git")
    for _ in range(rng.randint(5, 12)):
        files = [t.names.module(pick(rng, "ts", "py", "go")) for _ in range(rng.randint(1, 4))]
        t.emit("git status --short", "\n".join(f" M {f}" for f in files), tool="git")
        t.emit("git diff --stat", "\n".join(f" {f} | {rng.randint(1, 90)} {'+' * rng.randint(1, 12)}{'-' * rng.randint(0, 8)}"
                                            for f in files), tool="git")
        msg = f"{pick(rng, 'Fix', 'Add', 'Handle', 'Refactor', 'Test')} {t.names.ident().replace('_', ' ')} in {files[0].split('/')[-2]}"
        h = noise.hexid(rng, 7)
        t.emit(f'git commit -am "{msg}"', f"[{branch} {h}] {msg}\n {len(files)} file{'s' if len(files) > 1 else ''} changed, "
               f"{rng.randint(1, 120)} insertions(+), {rng.randint(0, 60)} deletions(-)", tool="git")
    t.emit(f"git push -u origin {branch}", f"remote: \nremote: Create a pull request for '{branch}' on GitHub by visiting:\n"
           f"remote:      https://github.com/acme/{project}/pull/new/{branch}\nremote: \n"
           f"To github.com:acme/{project}.git\n * [new branch]      {branch} -> {branch}", tool="git")
    t.emit("gh pr create --fill --base main", f"https://github.com/acme/{project}/pull/{rng.randint(100, 9000)}", tool="gh")
    return t.script(actions)


@healthy
def dependency_upgrades(rng: random.Random, actions: bool) -> Script:
    """Upgrade packages one at a time and run the tests after each."""
    t, project, home, style = _setup(rng)
    npm = rng.random() < 0.5
    pkgs = rng.sample(PACKAGES_NPM if npm else PACKAGES_PY, rng.randint(5, 10))
    test_cmd = pick(rng, "npm test --silent", "npx vitest run") if npm else pick(rng, "pytest -q", "python -m pytest -q")
    for i, p in enumerate(pkgs):
        a, b = f"{rng.randint(0, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}", f"{rng.randint(1, 12)}.{rng.randint(0, 9)}.{rng.randint(0, 9)}"
        if npm:
            out = (f"\nchanged {rng.randint(1, 9)} packages, and audited {rng.randint(300, 1500)} packages in {t.dur(rng.uniform(1, 20))}\n\n"
                   f"{rng.randint(40, 200)} packages are looking for funding\n  run `npm fund` for details\n\nfound 0 vulnerabilities")
            t.emit(f"npm install {p}@{b}", out, units=(i, len(pkgs)))
        else:
            t.emit(f"uv pip install -U '{p}=={b}'", f"Resolved {rng.randint(20, 90)} packages in {rng.randint(10, 900)}ms\n"
                   f"Uninstalled 1 package in {rng.randint(1, 30)}ms\nInstalled 1 package in {rng.randint(1, 30)}ms\n - {p}=={a}\n + {p}=={b}",
                   units=(i, len(pkgs)))
        notes = [f"- {pick(rng, 'Removed', 'Deprecated', 'Renamed', 'Fixed')} `{t.names.camel()}` ({pick(rng, 'breaking', 'minor', 'bugfix')})"
                 for _ in range(rng.randint(1, 4))]
        t.emit(f"fetch https://github.com/{p}/{p}/releases/tag/v{b}", f"## {p} v{b}\n" + "\n".join(notes), tool="web_fetch",
               units=(i, len(pkgs)))
        fails = [(f"tests/test_{rng.choice(NOUNS)}.py", t.names.test(), _assertion(rng, t.names), rng.randint(10, 300))] \
            if rng.random() < 0.25 else []
        t.emit(test_cmd,
               pytest_output(t, project=project, home=home, failures=fails, passed=rng.randint(100, 900), secs=rng.uniform(5, 120),
                             plugins=False, seed=None, verbose_header=False) if not npm else
               f" Test Files  {rng.randint(20, 90)} passed ({rng.randint(20, 90)})\n      Tests  {rng.randint(200, 900)} passed\n"
               f"   Start at  {t.ts()}\n   Duration  {t.dur(rng.uniform(3, 60))}", units=(i + 1, len(pkgs)))
    return t.script(actions)


@healthy
def scaffold_files(rng: random.Random, actions: bool) -> Script:
    """Generate the files of a new module from a spec, one per step, counted against the plan."""
    t, project, home, style = _setup(rng)
    ext = pick(rng, "ts", "py", "go", "rs")
    paths = [t.names.module(ext) for _ in range(rng.randint(8, 24))]
    t.emit(None, pick(rng, "Plan: ", "Files to create: ", "Scaffolding ") + ", ".join(paths))
    fm = rng.randrange(3)
    for i, p in enumerate(paths):
        n = rng.randint(20, 300)
        body = "\n".join(code_line(rng, t.names, ext) for _ in range(rng.randint(2, 5)))
        out = (f"File created successfully at: {home}/{project}/{p}", f"Wrote {n} lines to {p}",
               f"Created {p} ({noise.size(n * 38, style)})")[fm]
        t.emit(f"write {p}", f"{out}\n{body}" if rng.random() < 0.5 else out, tool="write", units=(i + 1, len(paths)))
    return t.script(actions)


@healthy
def debug_prints(rng: random.Random, actions: bool) -> Script:
    """Add logging, rerun a reproduction script, narrow the bug down from what each run prints."""
    t, project, home, style = _setup(rng)
    script = f"scripts/repro_{t.names.ident()}.py"
    for _ in range(rng.randint(6, 14)):
        f = t.names.module("py")
        line = rng.randint(10, 400)
        t.emit(f"edit {f}:{line}", edit_result(t, f, line, 1, 0, style, f"{home}/{project}"), tool="edit")
        logs = [f"{t.ts()} DEBUG {f.split('/')[-1][:-3]}: {t.names.ident()}={rng.choice(('None', '[]', repr(t.names.ident()), str(rng.randint(0, 99))))} "
                f"keys={sorted(t.names.ident() for _ in range(rng.randint(1, 3)))}" for _ in range(rng.randint(2, 6))]
        exc = rng.random() < 0.5
        out = "\n".join(logs) + (f"\nTraceback (most recent call last):\n  File \"{home}/{project}/{f}\", line {line + 3}, in "
                                 f"{t.names.ident()}\n{pick(rng, 'KeyError', 'TypeError', 'AttributeError')}: {t.names.ident()!r}"
                                 if exc else "\nexit 0")
        t.emit(f"python {script}", tail(out.split("\n"), rng))
    return t.script(actions)

