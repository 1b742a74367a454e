"""Coding agents that learn nothing: the same failure, retried, reworded, moved about, cycled through."""

from __future__ import annotations

import random

from ..stalls import Script
from . import noise, phrases
from .toolout import (build_cmd, build_output, compiler_line, edit_result, lint_output, new_error, new_lint, pytest_output,
                      read_output)
from .trace import Trial, looping, pick
from .words import NOUNS, PROJECTS


def _setup(rng: random.Random) -> tuple[Trial, str, str, int]:
    return Trial(rng), rng.choice(PROJECTS), noise.home(rng), rng.randrange(3)


def prefix(t: Trial, project: str, home: str, style: int, lang: str, n: tuple[int, int] = (2, 8)) -> None:
    """Real work before the loop: reading, grepping and editing new files."""
    rng = t.rng
    for _ in range(rng.randint(*n)):
        f = t.names.module(lang if lang != "java" else "java")
        r = rng.random()
        if r < 0.45:
            t.emit(f"cat {f}", read_output(rng, t.names, lang, 1, rng.randint(4, 14), style), tool="read")
        elif r < 0.75:
            sym = t.names.camel()
            t.emit(f"grep -rn '{sym}' .", "\n".join(f"{t.names.module(lang)}:{rng.randint(1, 300)}:  {sym}(" for _ in range(rng.randint(1, 5))),
                   tool="grep")
        else:
            line = rng.randint(5, 300)
            t.emit(f"edit {f}", edit_result(t, f, line, rng.randint(1, 6), rng.randint(0, 4), style, f"{home}/{project}"), tool="edit")


def cycles(rng: random.Random, period: int) -> int:
    """How many times a loop of ``period`` reports goes round (past its deadline, as loops do)."""
    within = max(5, period + 2)
    return -(-(within + rng.randint(3, 10)) // period)


def narrate(t: Trial, on: bool, what: str) -> str | None:
    return phrases.retry(t.rng, what) if on else None


@looping
def npm_build_retry(rng: random.Random, actions: bool) -> Script:
    """The same failing npm build rerun; npm names a new timestamped debug log every time."""
    t, project, home, style = _setup(rng)
    prefix(t, project, home, style, "ts")
    cmd = pick(rng, "npm run build", "npm run build --workspace=web", "npm run build 2>&1")
    errs = [compiler_line(new_error(rng, t.names, "ts"), rng.randint(5, 300), rng.randint(1, 40)) for _ in range(rng.randint(1, 3))]
    npm10, talk = rng.random() < 0.5, rng.random() < 0.5
    clear = rng.choice((None, None, ("rm -rf node_modules/.cache dist", "(no output)"),
                        ("npm cache clean --force", "npm WARN using --force Recommended protections disabled."),
                        ("npx tsc --build --clean", "")))
    period = 1 if clear is None else 2
    t.loop(period)
    for _ in range(cycles(rng, period)):
        if clear:
            t.emit(clear[0], clear[1])
        t.emit(cmd, build_output(t, "ts", cmd, errs, project=project, secs=rng.uniform(2, 30), home=home, npm10=npm10),
               note=narrate(t, talk, "the build"))
    return t.script(actions)


@looping
def compiled_build_retry(rng: random.Random, actions: bool) -> Script:
    """cargo / go / gradle / mypy failing the same way on every run (build scans, timings and crates vary)."""
    t, project, home, style = _setup(rng)
    lang = pick(rng, "rs", "go", "java", "py")
    prefix(t, project, home, style, lang)
    cmd = build_cmd(lang, rng)
    errs = [compiler_line(new_error(rng, t.names, lang), rng.randint(5, 300), rng.randint(1, 40)) for _ in range(rng.randint(1, 3))]
    talk = rng.random() < 0.5
    t.loop()
    for _ in range(cycles(rng, 1)):
        t.emit(cmd, build_output(t, lang, cmd, errs, project=project, secs=rng.uniform(3, 120), home=home),
               note=narrate(t, talk, "the build"))
    return t.script(actions)


@looping
def pytest_same_failure(rng: random.Random, actions: bool) -> Script:
    """The same test fails on every rerun; seeds, temp dirs, order and timings change."""
    t, project, home, style = _setup(rng)
    prefix(t, project, home, style, "py")
    test = t.names.test()
    f = f"tests/test_{rng.choice(NOUNS)}.py"
    a = rng.choice((f"assert {t.names.ident()}(row) == 3 | AssertionError: assert 2 == 3",
                    f"{t.names.ident()}(conn) | sqlite3.OperationalError: database is locked",
                    "assert resp.status_code == 201 | AssertionError: assert 422 == 201"))
    fail = (f, test, a, rng.randint(10, 300))
    cmd = pick(rng, f"pytest {f}", f"pytest {f}::{test}", "pytest -q", f"python -m pytest {f} -x")
    passed = rng.randint(0, 300)
    randomly, session, talk = rng.random() < 0.5, rng.randint(1, 300), rng.random() < 0.5
    t.loop()
    for _ in range(cycles(rng, 1)):
        session += 1
        t.emit(cmd, pytest_output(t, project=project, home=home, failures=[fail], passed=passed, secs=rng.uniform(0.5, 40),
                                  plugins=randomly, seed=rng.randint(10**8, 4 * 10**9) if randomly else None, tmp_n=session),
               note=narrate(t, talk, "the test"))
    return t.script(actions)


CHECKERS = {
    "ts": (lambda e, ln, c: compiler_line(e, ln, c),
           lambda e, ln, c: f'[{{"file": "{e["path"]}", "line": {ln}, "character": {c}, "severity": "error", '
                            f'"code": {e["code"][2:]}, "message": "{e["msg"]}"}}]',
           lambda e, ln, c: f"✘ [ERROR] {e['msg']}\n\n    {e['path']}:{ln}:{c}:\n      {ln} │ ...\n\n1 error"),
    "py": (lambda e, ln, c: compiler_line(e, ln, c),
           lambda e, ln, c: f"{e['path']}:{ln}:{c} - error: {e['msg']} (report{e['code'].title().replace('-', '')})\n1 error, 0 warnings, 0 informations",
           lambda e, ln, c: f'{e["path"]}:{ln}: error: {e["msg"]}  [{e["code"]}]\nFound 1 error in 1 file (checked 1 source file)'),
    "go": (lambda e, ln, c: compiler_line(e, ln, c),
           lambda e, ln, c: f"# example.com/app\n./{e['path']}:{ln}:{c}: {e['msg']}",
           lambda e, ln, c: f"{e['path']}:{ln}:{c}: {e['msg']} (typecheck)"),
}
FIXES = ("Add a type annotation to {a}", "Guard {a} with a null check", "Import {a} explicitly", "Cast {a} to the expected type",
         "Move the {a} lookup above its use", "Rename the local {a} to avoid shadowing", "Wrap {a} in an Optional",
         "Declare {a} before the loop", "Inline {a}", "Re-export {a} from the index", "Use a default value for {a}",
         "Change the signature of {a}", "Make {a} async", "Split {a} into two statements")


@looping
def error_moves_line_col(rng: random.Random, actions: bool) -> Script:
    """Edit, check, same error: it moves only in file:line:col and in how the checker or the agent words it."""
    t, project, home, style = _setup(rng)
    lang = pick(rng, "ts", "py", "go")
    prefix(t, project, home, style, lang)
    e = new_error(rng, t.names, lang)
    sym = e["a"]
    line, col = rng.randint(20, 300), rng.randint(3, 40)
    tools = rng.sample(range(3), rng.randint(1, 3))
    cmd = {0: build_cmd(lang, rng), 1: "get_diagnostics", 2: {"ts": "npx vite build", "py": "pyright", "go": "golangci-lint run"}[lang]}
    t.loop(2)
    for _ in range(cycles(rng, 2)):
        fix = rng.choice(FIXES).format(a=sym)
        t.emit(f"edit {e['path']}: {fix.lower()}", edit_result(t, e["path"], line, rng.randint(1, 4), rng.randint(0, 3), style,
                                                                f"{home}/{project}"), tool="edit", note=fix)
        line = max(1, line + rng.randint(-3, 4))
        col = max(1, col + rng.choice((0, 0, 2, -2, 4)))
        k = rng.choice(tools)
        out = CHECKERS[lang][k](e, line, col)
        t.emit(cmd[k], out, tool="diagnostics" if k == 1 else "bash",
               note=rng.choice((phrases.still(rng, "type error"), phrases.still(rng, f"error at line {line}"),
                                f"{e['path']}:{line}:{col} — {pick(rng, 'still', 'again', 'same')}: {e['msg'].split(':')[0]}")))
    return t.script(actions)


@looping
def paraphrased_test_retry(rng: random.Random, actions: bool) -> Script:
    """The same failing test run again and again with a reworded reason and a slightly different command."""
    t, project, home, style = _setup(rng)
    prefix(t, project, home, style, "py")
    f, test = f"tests/test_{rng.choice(NOUNS)}.py", t.names.test()
    fail = (f, test, f"assert {t.names.ident()}() == 'ok' | AssertionError: assert 'retry' == 'ok'", rng.randint(10, 300))
    cmds = (f"pytest {f}::{test}", f"python -m pytest {f} -k {test}", f"pytest {f}::{test} -vv", f"pytest -x {f}",
            f"uv run pytest {f}::{test}", f"pytest {f} -k '{test}' --no-header")
    t.loop()
    for _ in range(cycles(rng, 1)):
        c = rng.choice(cmds)
        t.emit(c, pytest_output(t, project=project, home=home, failures=[fail], passed=0, secs=rng.uniform(0.3, 9),
                                plugins=False, seed=None, verbose_header="no-header" not in c),
               note=phrases.retry(rng, rng.choice(("the failing test", test, "that test", "the test case", "it"))))
    return t.script(actions)


@looping
def thinking_fresh_words(rng: random.Random, actions: bool) -> Script:
    """New hunches in new words, new search patterns, and every search comes back empty."""
    t, project, home, style = _setup(rng)
    prefix(t, project, home, style, "ts")
    base = [rng.choice(NOUNS), rng.choice(NOUNS)]
    forms = (base[0] + base[1].title(), "_".join(base), "-".join(base), base[0].upper() + "_" + base[1].upper(),
             base[1], base[0] + base[1].title() + "Impl", "use" + base[0].title() + base[1].title(), base[0][:4] + ".*" + base[1][:4])
    empty = rng.choice((("(no output)", "No matches found", "exit code 1"), ("No files found",), ("",), ("0 results",)))
    t.loop()
    for _ in range(cycles(rng, 1)):
        p = rng.choice(forms)
        c = rng.choice((f"rg -n '{p}'", f"grep -rni '{p}' src/ lib/", f"find . -iname '*{p}*'", f"git grep -n '{p}'",
                        f"rg -l '{p}' --hidden", f"glob **/*{p}*"))
        t.emit(c, rng.choice(empty), tool="search", note=phrases.hunch(rng, repr(p)))
    return t.script(actions)


@looping
def fix_revert_oscillation(rng: random.Random, actions: bool) -> Script:
    """Two fixes, each breaking what the other fixed: apply A, error X; apply B, error Y; again."""
    t, project, home, style = _setup(rng)
    lang = pick(rng, "ts", "rs", "go", "py")
    prefix(t, project, home, style, lang)
    cmd = build_cmd(lang, rng)
    x, y = new_error(rng, t.names, lang), new_error(rng, t.names, lang)
    lx, ly = (rng.randint(5, 300), rng.randint(1, 30)), (rng.randint(5, 300), rng.randint(1, 30))
    fa, fb = t.names.camel(), t.names.camel()
    t.loop(4)
    for _ in range(cycles(rng, 4)):
        for fix, err, pos in ((fa, x, lx), (fb, y, ly)):
            t.emit(f"edit {err['path']}: use {fix}", edit_result(t, err["path"], pos[0], 2, 2, style, f"{home}/{project}"), tool="edit")
            t.emit(cmd, build_output(t, lang, cmd, [compiler_line(err, *pos)], project=project, secs=rng.uniform(2, 60), home=home))
    return t.script(actions)


@looping
def tool_cycle(rng: random.Random, actions: bool) -> Script:
    """A round of 3–8 tool calls repeated as is: every call gives what it gave last round."""
    t, project, home, style = _setup(rng)
    prefix(t, project, home, style, "py")
    f = t.names.module("py")
    test = (f"tests/test_{rng.choice(NOUNS)}.py", t.names.test(), f"assert {t.names.ident()} | AssertionError", rng.randint(5, 90))
    listing = "\n".join(t.names.ident() + ".py" for _ in range(rng.randint(3, 9)))
    code = read_output(rng, t.names, "py", 1, rng.randint(5, 12), style)
    sym = t.names.ident()
    hits = "\n".join(f"{t.names.module('py')}:{rng.randint(1, 200)}:{sym}" for _ in range(rng.randint(1, 4)))
    logline = f"{pick(rng, 'ERROR', 'CRITICAL')} {t.names.ident()}: {pick(rng, 'connection reset', 'timeout after 30s', 'null payload')}"
    pool = [
        (f"cat {f}", lambda: code),
        ("git status --short", lambda: f" M {f}"),
        ("git diff --stat", lambda: f" {f} | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)"),
        (f"ls {f.rsplit('/', 1)[0]}", lambda: listing),
        (f"grep -rn {sym} src", lambda: hits),
        (f"pytest {test[0]} -q", lambda: pytest_output(t, project=project, home=home, failures=[test], passed=3,
                                                       secs=rng.uniform(0.5, 5), plugins=False, seed=None, verbose_header=False)),
        ("tail -n 5 logs/app.log", lambda: "\n".join(f"{t.ts()} {logline}" for _ in range(rng.randint(2, 5)))),
        (f"python -c 'import {f[:-3].replace('/', '.')}'", lambda: f"ModuleNotFoundError: No module named '{sym}'"),
    ]
    k = rng.randint(3, 8)
    chosen = rng.sample(pool, k)
    t.loop(k)
    for _ in range(cycles(rng, k)):
        for c, out in chosen:
            t.emit(c, out())
    return t.script(actions)


@looping
def format_fight(rng: random.Random, actions: bool) -> Script:
    """prettier and eslint --fix undoing each other's changes to the same files, round after round."""
    t, project, home, style = _setup(rng)
    prefix(t, project, home, style, "ts")
    files = [t.names.module("ts") for _ in range(rng.randint(2, 6))]
    probs = [new_lint(rng, t.names, "eslint", f) for f in files]
    t.loop(2)
    for _ in range(cycles(rng, 2)):
        t.emit("npx prettier --write src", "\n".join(f"{f} {rng.randint(8, 140)}ms" for f in files))
        t.emit("npx eslint --fix src", lint_output(t, "eslint", probs, f"{home}/{project}/"))
    return t.script(actions)


@looping
def step_counter_rising(rng: random.Random, actions: bool) -> Script:
    """The agent counts its own steps as units done while the dev server it probes never answers."""
    t, project, home, style = _setup(rng)
    prefix(t, project, home, style, "ts")
    port = rng.choice((3000, 5173, 8000, 8080))
    path = pick(rng, "/health", "/api/status", "/", "/api/v1/ping")
    total = rng.choice((30, 50, 100))
    step = len([b for b in t.beats if b.plain])
    t.loop()
    for _ in range(cycles(rng, 1)):
        step += 1
        ms = rng.randint(0, 3)
        out = rng.choice((f"curl: (7) Failed to connect to localhost port {port} after {ms} ms: Couldn't connect to server",
                          f"curl: (7) Failed to connect to localhost port {port} after {ms} ms: Connection refused"))
        t.emit(f"curl -sS http://localhost:{port}{path}", out, units=(step, total))
    return t.script(actions)


@looping
def edit_no_match(rng: random.Random, actions: bool) -> Script:
    """An edit tool refusing the same replacement; the agent varies whitespace and quotes in the string it asks for."""
    t, project, home, style = _setup(rng)
    prefix(t, project, home, style, "py")
    f = t.names.module("py")
    target = f"    {t.names.ident()} = {t.names.ident()}.get('{rng.choice(NOUNS)}')"
    says = rng.choice((lambda s: f"<tool_use_error>String to replace not found in file.\nString: {s}</tool_use_error>",
                       lambda s: f"Error: no match for the SEARCH block in {f}:\n<<<<<<< SEARCH\n{s}\n=======",
                       lambda s: f"apply_patch: Failed to find expected lines in {f}:\n{s}"))
    t.loop()
    for _ in range(cycles(rng, 1)):
        s = target
        if rng.random() < 0.5:
            s = s.replace("'", '"')
        s = rng.choice((s, s.strip(), "\t" + s.strip(), s + "  ", s.replace(" = ", "=")))
        t.emit(f"edit {f}: {s.strip()!r}", says(s), tool="edit", note=rng.choice((None, phrases.retry(rng, "the edit"))))
    return t.script(actions)
