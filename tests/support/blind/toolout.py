"""What build, test and lint tools print, from the values a coding family gives them.

Each renderer takes the trial (for its clock, number and duration styles) and returns the text the
tool would print; the family decides what is wrong and what changed.
"""

from __future__ import annotations

import random

from . import noise
from .trace import Trial
from .words import Names

# (language, compiler error in the tool's words: a template over two identifiers a, b)
ERRORS = {
    "ts": (("TS2345", "Argument of type 'string | undefined' is not assignable to parameter of type 'string'."),
           ("TS2339", "Property '{a}' does not exist on type '{B}'."),
           ("TS2304", "Cannot find name '{a}'."),
           ("TS2322", "Type 'number' is not assignable to type '{B}'."),
           ("TS7006", "Parameter '{a}' implicitly has an 'any' type."),
           ("TS2554", "Expected 2 arguments, but got 1."),
           ("TS18048", "'{a}' is possibly 'undefined'."),
           ("TS2305", "Module '\"./{b}\"' has no exported member '{B}'.")),
    "rs": (("E0308", "mismatched types: expected `{B}`, found `Option<{B}>`"),
           ("E0425", "cannot find value `{a}` in this scope"),
           ("E0599", "no method named `{a}` found for struct `{B}` in the current scope"),
           ("E0382", "borrow of moved value: `{a}`"),
           ("E0277", "the trait bound `{B}: Serialize` is not satisfied"),
           ("E0061", "this function takes 2 arguments but 1 argument was supplied")),
    "go": (("", "undefined: {a}"),
           ("", "cannot use {a} (variable of type *{B}) as {B} value in argument to {b}"),
           ("", "{a} declared and not used"),
           ("", "too many return values\n\thave (*{B}, error)\n\twant (error)"),
           ("", "missing return")),
    "java": (("", "cannot find symbol\n  symbol:   method {a}()\n  location: class {B}"),
             ("", "incompatible types: String cannot be converted to {B}"),
             ("", "unreported exception IOException; must be caught or declared to be thrown"),
             ("", "method {a} in class {B} cannot be applied to given types;")),
    "py": (("arg-type", 'Argument 1 to "{a}" has incompatible type "str | None"; expected "str"'),
           ("attr-defined", '"{B}" has no attribute "{a}"'),
           ("name-defined", 'Name "{a}" is not defined'),
           ("return-value", 'Incompatible return value type (got "None", expected "{B}")'),
           ("union-attr", 'Item "None" of "{B} | None" has no attribute "{a}"')),
}
EXT = {"ts": "ts", "rs": "rs", "go": "go", "java": "java", "py": "py"}


def new_error(rng: random.Random, names: Names, lang: str) -> dict[str, str]:
    code, msg = rng.choice(ERRORS[lang])
    a = names.camel() if lang in ("ts", "java") else names.ident()
    b = names.ident()
    B = names.type_name()
    path = names.module(EXT[lang], root="src" if lang != "go" else "internal")
    return {"code": code, "msg": msg.format(a=a, b=b, B=B), "path": path, "lang": lang, "a": a if "{a}" in msg else B}


def compiler_line(e: dict[str, str], line: int, col: int) -> str:
    """The error as the compiler prints it, at ``line:col``."""
    lang, code, msg, path = e["lang"], e["code"], e["msg"], e["path"]
    if lang == "ts":
        return f"{path}({line},{col}): error {code}: {msg}"
    if lang == "rs":
        head, _, rest = msg.partition(": ")
        return (f"error[{code}]: {head}\n  --> {path}:{line}:{col}\n   |\n{line:<3}|     let _ = {path.split('/')[-1][:-3]}();\n"
                f"   |             ^^^^ {rest or head}")
    if lang == "go":
        return f"{path}:{line}:{col}: {msg}"
    if lang == "java":
        return f"{path}:{line}: error: {msg}"
    return f"{path}:{line}:{col}: error: {msg}  [{code}]"


def build_cmd(lang: str, rng: random.Random) -> str:
    return {"ts": rng.choice(("npm run build", "npx tsc --noEmit", "pnpm build", "yarn build")),
            "rs": rng.choice(("cargo build", "cargo check", "cargo build --release", "cargo test --no-run")),
            "go": rng.choice(("go build ./...", "go vet ./...", "make build")),
            "java": rng.choice(("./gradlew build", "./gradlew compileJava", "mvn -q compile")),
            "py": rng.choice(("mypy src", "uv run mypy .", "python -m mypy src/"))}[lang]


def build_output(t: Trial, lang: str, cmd: str, errors: list[str], *, project: str, secs: float,
                 home: str, npm10: bool = False) -> str:
    """The whole output of a build ``cmd`` that failed with ``errors`` (already rendered lines)."""
    rng = t.rng
    n = len(errors)
    body = "\n".join(errors)
    if lang == "ts":
        if cmd.startswith("npm") or cmd.startswith("pnpm") or cmd.startswith("yarn"):
            logp = f"{home}/.npm/_logs/{noise.npm_stamp(t.now)}-debug-0.log"
            tail_ = ((f"npm error Lifecycle script `build` failed with error:\nnpm error code 2\n"
                      f"npm error path {home}/{project}\nnpm error command failed\n"
                      f"npm error command sh -c tsc -p tsconfig.build.json\n"
                      f"npm error A complete log of this run can be found in: {logp}")
                     if npm10 else
                     (f"npm ERR! code 2\nnpm ERR! path {home}/{project}\nnpm ERR! command failed\n"
                      f"npm ERR! command sh -c tsc -p tsconfig.build.json\n\n"
                      f"npm ERR! A complete log of this run can be found in:\nnpm ERR!     {logp}"))
            return (f"\n> {project}@{t.fixed('version', lambda: f'0.{rng.randint(1, 9)}.{rng.randint(0, 9)}')} build\n> tsc -p tsconfig.build.json\n\n{body}\n\n"
                    f"Found {n} error{'s' if n != 1 else ''} in {len({e.split('(')[0] for e in errors})} file(s).\n\n"
                    f"{tail_}")
        return f"{body}\n\nFound {n} error{'s' if n != 1 else ''}."
    if lang == "rs":
        crates = rng.sample(("serde", "tokio", "anyhow", "clap", "regex", "libc", "bytes", "itoa"), rng.randint(0, 3))
        comp = "".join(f"   Compiling {c} v{t.fixed(c, lambda: f'1.{rng.randint(0, 40)}.{rng.randint(0, 9)}')}\n" for c in crates)
        return (f"{comp}   Compiling {project} v0.1.0 ({home}/{project})\n{body}\n\n"
                f"error: could not compile `{project}` (bin \"{project}\") due to {n} previous error{'s' if n != 1 else ''}")
    if lang == "go":
        pkgs = sorted({e.split(":")[0].rsplit("/", 1)[0] for e in errors})
        return "\n".join(f"# example.com/{project}/{p}" for p in pkgs) + "\n" + body
    if lang == "java":
        scan = f"https://gradle.com/s/{noise.b62(rng, 13).lower()}"
        return (f"> Task :app:compileJava FAILED\n{body}\n{n} error{'s' if n != 1 else ''}\n\n"
                f"FAILURE: Build failed with an exception.\n\n* What went wrong:\n"
                f"Execution failed for task ':app:compileJava'.\n> Compilation failed; see the compiler error output for details.\n\n"
                f"* Try:\n> Run with --scan to get full insights.\n\nBUILD FAILED in {int(secs)}s\n"
                f"{rng.randint(1, 4)} actionable tasks: 1 executed, {rng.randint(0, 3)} up-to-date\n"
                + (f"\nPublishing build scan...\n{scan}\n" if rng.random() < 0.7 else ""))
    return f"{body}\nFound {n} error{'s' if n != 1 else ''} in {len(errors)} file{'s' if n != 1 else ''} (checked {rng.randint(40, 400)} source files)"


def build_ok(t: Trial, lang: str, project: str, secs: float) -> str:
    rng = t.rng
    version = t.fixed("version", lambda: f"0.{rng.randint(1, 9)}.{rng.randint(0, 9)}")
    vite = t.fixed("vite", lambda: f"5.{rng.randint(0, 4)}.{rng.randint(0, 9)}")
    return {"ts": f"\n> {project}@{version} build\n> tsc -p tsconfig.build.json && vite build\n\nvite v{vite} building for production...\n"
                  f"✓ {rng.randint(80, 900)} modules transformed.\ndist/index.html   0.46 kB\ndist/assets/index-{noise.b62(rng, 8)}.js  {rng.randint(90, 900)}.{rng.randint(10, 99)} kB\n✓ built in {t.dur(secs)}",
            "rs": f"   Compiling {project} v0.1.0\n    Finished `dev` profile [unoptimized + debuginfo] target(s) in {secs:.2f}s",
            "go": "",
            "java": f"BUILD SUCCESSFUL in {int(secs)}s\n{rng.randint(3, 9)} actionable tasks: {rng.randint(1, 3)} executed, {rng.randint(1, 5)} up-to-date",
            "py": f"Success: no issues found in {rng.randint(40, 400)} source files"}[lang]


def pytest_output(t: Trial, *, project: str, home: str, failures: list[tuple[str, str, str, int]],
                  passed: int, secs: float, plugins: bool, seed: int | None, verbose_header: bool = True,
                  tmp_n: int | None = None) -> str:
    """A pytest run; ``failures`` are (file, test, assertion line, lineno)."""
    rng = t.rng
    total = passed + len(failures)
    head = ""
    if verbose_header:
        py = t.fixed("python", lambda: f"3.{rng.choice((10, 11, 12))}.{rng.randint(1, 9)}")
        pt = t.fixed("pytest", lambda: f"8.{rng.randint(0, 3)}.{rng.randint(0, 2)}")
        head = (f"{'=' * 29} test session starts {'=' * 30}\nplatform linux -- Python {py}, "
                f"pytest-{pt}, pluggy-1.5.0\nrootdir: {home}/{project}\n"
                + ("plugins: randomly-3.15.0, xdist-3.6.1, cov-5.0.0\n" if plugins else "")
                + (f"Using --randomly-seed={seed}\n" if seed is not None else "")
                + f"collected {total} items\n\n")
    files: dict[str, list[str]] = {}
    for f, _, _, _ in failures:
        files.setdefault(f, [])
    dots = []
    for f in sorted(files) or ["tests/test_misc.py"]:
        k = t.fixed(("tests in", f), lambda: rng.randint(3, 30))  # a file holds as many tests on every run
        nf = sum(1 for ff, *_ in failures if ff == f)
        marks = ["."] * k + ["F"] * nf
        if seed is not None:  # pytest-randomly: another order on every run
            random.Random(seed).shuffle(marks)
        else:
            marks = t.fixed(("order", f, nf), lambda: rng.sample(marks, len(marks)))
        dots.append(f"{f} {''.join(marks)}")
    dots.append("... [100%]")
    fails = []
    session = tmp_n if tmp_n is not None else rng.randint(1, 400)  # one base temp dir per session
    for f, test, assertion, lineno in failures:
        tmpp = f"/tmp/pytest-of-{home.rsplit('/', 1)[-1]}/pytest-{session}/{test}0"
        fails.append(f"{'_' * 20} {test} {'_' * 20}\n\ntmp_path = PosixPath('{tmpp}')\n\n    def {test}(tmp_path):\n"
                     f">       {assertion.split(' | ')[0]}\nE       {assertion.split(' | ')[-1]}\n\n{f}:{lineno}: AssertionError")
    summary = "\n".join(f"FAILED {f}::{test} - {a.split(' | ')[-1]}" for f, test, a, _ in failures)
    counts = (f"{len(failures)} failed, " if failures else "") + f"{passed} passed"
    end = f"{'=' * 20} {counts} in {secs:.2f}s {'=' * 20}"
    if failures:
        return head + "\n".join(dots) + f"\n\n{'=' * 35} FAILURES {'=' * 35}\n" + "\n".join(fails) + \
            f"\n{'=' * 25} short test summary info {'=' * 25}\n{summary}\n{end}"
    return head + "\n".join(dots) + "\n\n" + end


def lint_output(t: Trial, tool: str, issues: list[tuple[str, int, int, str, str]], root: str = "") -> str:
    """``issues`` are (path, line, col, rule, message)."""
    if tool == "eslint":
        by: dict[str, list[str]] = {}
        for p, ln, c, rule, msg in issues:
            by.setdefault(p, []).append(f"  {ln}:{c}  error  {msg}  {rule}")
        body = "\n\n".join(f"{root}{p}\n" + "\n".join(v) for p, v in by.items())
        n = len(issues)
        return f"{body}\n\n✖ {n} problem{'s' if n != 1 else ''} ({n} error{'s' if n != 1 else ''}, 0 warnings)"
    lines = [f"{p}:{ln}:{c}: {rule} {msg}" for p, ln, c, rule, msg in issues]
    return "\n".join(lines) + f"\nFound {len(issues)} error{'s' if len(issues) != 1 else ''}."


LINT_RULES = {
    "eslint": (("no-unused-vars", "'{a}' is defined but never used"), ("eqeqeq", "Expected '===' and instead saw '=='"),
               ("prefer-const", "'{a}' is never reassigned. Use 'const' instead"),
               ("@typescript-eslint/no-explicit-any", "Unexpected any. Specify a different type"),
               ("react-hooks/exhaustive-deps", "React Hook useEffect has a missing dependency: '{a}'"),
               ("no-console", "Unexpected console statement")),
    "ruff": (("F401", "`{a}` imported but unused"), ("E501", "Line too long (104 > 88)"),
             ("F841", "Local variable `{a}` is assigned to but never used"), ("B006", "Do not use mutable data structures for argument defaults"),
             ("UP007", "Use `X | Y` for type annotations"), ("SIM108", "Use ternary operator instead of `if`-`else`-block")),
}


def new_lint(rng: random.Random, names: Names, tool: str, path: str) -> tuple[str, int, int, str, str]:
    rule, msg = rng.choice(LINT_RULES[tool])
    return (path, rng.randint(1, 400), rng.randint(1, 60), rule, msg.format(a=names.camel() if tool == "eslint" else names.ident()))


def git_log_line(rng: random.Random, msg: str) -> str:
    return f"{noise.hexid(rng, 7)} {msg}"


def code_line(rng: random.Random, names: Names, lang: str) -> str:
    a, b, B = names.ident(), names.ident(), names.type_name()
    if lang == "py":
        return rng.choice((f"def {a}({b}: {B}) -> {names.type_name()}:", f"    {a} = {b}.get({rng.choice(('id', 'name', 'key', 'ts'))!r})",
                           f"    if not {a}:", f"        raise ValueError(\"{rng.choice(('missing', 'bad', 'stale'))} {b}\")",
                           f"    return {B}({a}={b})", f"from .{b} import {B}", f"    for {a} in {b}:", f"class {B}({names.type_name()}):"))
    if lang == "go":
        return rng.choice((f"func {a}(ctx context.Context, {b} *{B}) error {{", f"\tif err := {a}(ctx); err != nil {{",
                           f"\t\treturn fmt.Errorf(\"{a}: %w\", err)", f"\t{a} := {b}.{B}()", f"type {B} struct {{"))
    if lang == "rs":
        return rng.choice((f"fn {a}({b}: &{B}) -> Result<{names.type_name()}> {{", f"    let {a} = {b}.{names.ident()}()?;",
                           f"    Ok({B} {{ {a}, {b} }})", f"impl {B} {{", f"use crate::{b}::{B};"))
    return rng.choice((f"export async function {names.camel()}({b}: {B}): Promise<{names.type_name()}> {{",
                       f"  const {names.camel()} = await {names.camel()}({b});", f"  if (!{names.camel()}) return null;",
                       f"import {{ {B} }} from './{b}';", f"  return {{ ...{names.camel()}, {b} }};", f"interface {B} {{"))


def read_output(rng: random.Random, names: Names, lang: str, start: int, n: int, style: int,
                header: list[str] | None = None) -> str:
    """A file read with line numbers (``cat -n``, an editor tool's ``12→``, or bare)."""
    lines = (header or []) + [code_line(rng, names, lang) for _ in range(n)]
    first = 1 if header else start
    fmt = (lambda i, s: f"{i:>6}\t{s}", lambda i, s: f"{i:>6}→{s}", lambda i, s: s)[style % 3]
    return "\n".join(fmt(first + i, s) for i, s in enumerate(lines))


def edit_result(t: Trial, path: str, line: int, added: int, removed: int, style: int, abs_root: str) -> str:
    rng = t.rng
    if style % 3 == 0:
        body = "\n".join(f"{line + i:>6}→{code_line(rng, t.names, path.rsplit('.', 1)[-1])}" for i in range(rng.randint(3, 7)))
        return f"The file {abs_root}/{path} has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n{body}"
    if style % 3 == 1:
        return f"Applied edit to {path}"
    return f"Success. Updated the following files:\nM {path}\n@@ -{line},{removed} +{line},{added} @@"
