"""CI watchers: polling pipelines, reading job results, bisecting, releasing (and re-running in vain)."""

from __future__ import annotations

import random

from ..stalls import Script
from . import noise, phrases
from .toolout import compiler_line, new_error
from .trace import Trial, healthy, looping, pick
from .words import NOUNS, PROJECTS

JOBS = ("lint", "typecheck", "unit (3.11)", "unit (3.12)", "integration", "build (ubuntu-latest)", "build (macos-14)",
        "build (windows-2022)", "e2e", "docs", "security-scan", "docker", "coverage")
MARK = {"done": "✓", "running": "*", "queued": "*", "failed": "X"}


def run_view(t: Trial, repo: str, run: int, jobs: list[tuple[str, str, int, float]], branch: str, ago: str) -> str:
    """``gh run view``: (job, state, job id, seconds) per job."""
    lines = []
    for name, state, jid, secs in jobs:
        took = f" in {int(secs // 60)}m{int(secs % 60)}s" if state in ("done", "failed") else ""
        lines.append(f"{MARK[state]} {name}{took} (ID {jid})")
    return (f"{MARK['running'] if any(s in ('running', 'queued') for _, s, _, _ in jobs) else '✓'} {branch} CI · {run}\n"
            f"Triggered via push {ago}\n\nJOBS\n" + "\n".join(lines) +
            f"\n\nFor more information about a job, try: gh run view --job=<job-id>\n"
            f"View this run on GitHub: https://github.com/acme/{repo}/actions/runs/{run}")


def glab_status(jobs: list[tuple[str, str, int, float]], pipeline: int, sha: str) -> str:
    word = {"done": "success", "running": "running", "queued": "pending", "failed": "failed"}
    return "\n".join(f"({word[s]}) • {int(secs // 60):02d}m {int(secs % 60):02d}s\t{name}\t\t{jid}" for name, s, jid, secs in jobs) + \
        f"\n\nhttps://gitlab.com/acme/app/-/pipelines/{pipeline}\nSHA: {sha}"


def _ago(secs: float) -> str:
    return "less than a minute ago" if secs < 60 else f"about {int(secs // 60)} minute{'s' if secs >= 120 else ''} ago"


@healthy
def ci_declared_wait(rng: random.Random, actions: bool) -> Script:
    """Push, then poll the pipeline under a declared wait; when it finishes, read the results and go on."""
    t = Trial(rng, rate=rng.uniform(10, 60))
    repo = rng.choice(PROJECTS)
    for _ in range(rng.randint(1, 3)):
        t.emit(f"git commit -am 'Fix {t.names.ident()}' && git push", f"[{t.names.slug()[:20]} {noise.hexid(rng, 7)}] Fix\n 1 file changed\n"
               f"To github.com:acme/{repo}.git\n   {noise.hexid(rng, 7)}..{noise.hexid(rng, 7)}  HEAD -> HEAD", tool="git")
        run = rng.randint(7_000_000_000, 9_999_999_999)
        jobs = [(j, "queued", rng.randint(10**10, 3 * 10**10), 0.0) for j in rng.sample(JOBS, rng.randint(3, 7))]
        wait_s = rng.choice((900.0, 1200.0, 1800.0, 3600.0))
        started = t.now
        polls = rng.randint(6, 20)
        for _ in range(polls):
            el = t.now - started
            jobs = [(n, "running" if el > 20 else s, i, 0.0) for n, s, i, _ in jobs]
            t.emit(f"gh run view {run}", run_view(t, repo, run, jobs, "main", _ago(el)), tool="gh", wait=("ci", wait_s))
            if t.now - started > 0.8 * wait_s:
                break
        jobs = [(n, "failed" if rng.random() < 0.15 else "done", i, rng.uniform(30, 900)) for n, _, i, _ in jobs]
        t.emit(f"gh run view {run}", run_view(t, repo, run, jobs, "main", _ago(t.now - started)), tool="gh")
        failed = [n for n, s, _, _ in jobs if s == "failed"]
        if failed:
            e = new_error(rng, t.names, pick(rng, "ts", "py"))
            t.emit(f"gh run view {run} --log-failed", f"{failed[0]}\t{t.ts()} {compiler_line(e, rng.randint(5, 300), rng.randint(1, 30))}",
                   tool="gh")
            line = rng.randint(5, 300)
            t.emit(f"edit {e['path']}", f"Applied edit to {e['path']} (line {line})", tool="edit")
        else:
            t.emit("gh pr view --json mergeable,reviewDecision", f'{{"mergeable": "MERGEABLE", "reviewDecision": '
                   f'"{pick(rng, "APPROVED", "REVIEW_REQUIRED")}"}}', tool="gh")
    return t.script(actions)


@healthy
def ci_jobs_progress(rng: random.Random, actions: bool) -> Script:
    """Watch a pipeline whose jobs finish one after another; every poll shows another job done."""
    t = Trial(rng, rate=rng.uniform(10, 60))
    repo = rng.choice(PROJECTS)
    pipeline = rng.randint(10**8, 2 * 10**9)
    names = rng.sample(JOBS, rng.randint(6, 12))
    ids = {j: rng.randint(10**9, 9 * 10**9) for j in names}
    took: dict[str, float] = {}
    gitlab, sha = rng.random() < 0.5, noise.hexid(rng, 40)
    started = t.now - rng.uniform(30, 300)
    for k in range(len(names)):
        t.advance()
        took[names[k]] = t.now - started - rng.uniform(0, 20)
        jobs = [(n, "done" if n in took else ("running" if i <= k + 2 else "queued"), ids[n], took.get(n, t.now - started))
                for i, n in enumerate(names)]
        out = glab_status(jobs, pipeline, sha) if gitlab else run_view(t, repo, pipeline, jobs, "main", _ago(t.now - started))
        t.emit("glab ci status" if gitlab else f"gh run view {pipeline}", out, tool="ci", units=(k + 1, len(names)))
    return t.script(actions)


@healthy
def ci_matrix_results(rng: random.Random, actions: bool) -> Script:
    """Read each matrix job's log: every platform and version with its own test results."""
    t = Trial(rng)
    cells = [(os_, v) for os_ in ("ubuntu-22.04", "ubuntu-24.04", "macos-14", "windows-2022") for v in ("3.9", "3.10", "3.11", "3.12", "3.13")]
    rng.shuffle(cells)
    cells = cells[: rng.randint(8, 16)]
    run = rng.randint(7_000_000_000, 9_999_999_999)
    for i, (os_, v) in enumerate(cells):
        fails = rng.choice((0, 0, 0, rng.randint(1, 4)))
        names = [t.names.test() for _ in range(fails)]
        body = (f"{os_} / py{v}: {rng.randint(300, 900) - fails} passed" + (f", {fails} failed" if fails else "") +
                f", {rng.randint(0, 30)} skipped in {t.dur(rng.uniform(40, 600))}" +
                "".join(f"\n  FAILED tests/test_{rng.choice(NOUNS)}.py::{n}" for n in names))
        t.emit(f"gh run view {run} --job {rng.randint(10**10, 3 * 10**10)} --log | tail -20", body, tool="gh", units=(i + 1, len(cells)))
    return t.script(actions)


@healthy
def flaky_rerun_then_pass(rng: random.Random, actions: bool) -> Script:
    """A flaky test fails, is rerun once and passes; the agent notes it and moves on to the next task."""
    t = Trial(rng)
    for _ in range(rng.randint(3, 6)):
        test = t.names.test()
        f = f"tests/test_{rng.choice(NOUNS)}.py"
        t.emit(f"pytest {f}", f"FAILED {f}::{test} - TimeoutError: {pick(rng, 'socket', 'lock', 'queue')} wait exceeded "
               f"{rng.randint(1, 10)}s\n1 failed, {rng.randint(5, 80)} passed in {t.dur(rng.uniform(2, 60))}")
        t.emit(f"pytest {f}::{test} --count 5", f"5 passed in {t.dur(rng.uniform(2, 30))}")
        t.emit(None, pick(rng, f"{test} is flaky (timing); filed issue #{rng.randint(100, 9999)} and marked it.",
                          f"Marked {test} @flaky, ticket #{rng.randint(100, 9999)}."))
        nxt = t.names.module("py")
        t.emit(f"cat {nxt}", "\n".join(f"{i + 1}\tdef {t.names.ident()}():" for i in range(rng.randint(2, 6))), tool="read")
    return t.script(actions)


@healthy
def release_artifacts(rng: random.Random, actions: bool) -> Script:
    """Build and upload the artifacts of a release, one platform at a time, each with its checksum."""
    t = Trial(rng)
    proj = rng.choice(PROJECTS)
    ver = f"v{rng.randint(0, 4)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}"
    targets = rng.sample(("x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu", "x86_64-apple-darwin", "aarch64-apple-darwin",
                          "x86_64-pc-windows-msvc", "x86_64-unknown-linux-musl", "armv7-unknown-linux-gnueabihf"), rng.randint(4, 7))
    for i, tg in enumerate(targets):
        t.advance(t.long(0.1, 0.35) if rng.random() < 0.4 else None)
        name = f"{proj}-{ver}-{tg}.tar.gz"
        t.emit(f"cross build --release --target {tg} && tar czf {name} ...", f"    Finished `release` profile [optimized] target(s) in "
               f"{t.dur(rng.uniform(30, 400))}\n{noise.hexid(rng, 64)}  {name}", units=(i, len(targets)))
        t.emit(f"gh release upload {ver} {name}", f"Successfully uploaded 1 asset to {ver} ({noise.size(rng.randint(2, 40) * 2**20, 0)})",
               tool="gh", units=(i + 1, len(targets)))
    return t.script(actions)


@healthy
def git_bisect(rng: random.Random, actions: bool) -> Script:
    """Bisect a regression: each step checks out another commit and judges it."""
    t = Trial(rng)
    left = rng.randint(60, 2000)
    t.emit("git bisect start HEAD v" + f"{rng.randint(1, 9)}.{rng.randint(0, 20)}.0", "status: waiting for both good and bad commits")
    while left > 1:
        left //= 2
        h = noise.hexid(rng, 40)
        steps = max(0, left.bit_length() - 1)
        t.advance(t.long(0.05, 0.25) if rng.random() < 0.3 else None)
        verdict = pick(rng, "good", "bad")
        t.emit(f"./repro.sh && git bisect {verdict}",
               f"{pick(rng, 'PASS', 'ok', 'exit 0') if verdict == 'good' else pick(rng, 'FAIL: regression reproduced', 'exit 1')}\n"
               f"Bisecting: {left} revisions left to test after this (roughly {steps} steps)\n[{h}] {pick(rng, 'Refactor', 'Bump', 'Fix', 'Merge')} "
               f"{t.names.ident().replace('_', ' ')}")
    t.emit("git bisect good", f"{noise.hexid(rng, 40)} is the first bad commit\ncommit {noise.hexid(rng, 40)}\nAuthor: {t.names.person()}\n\n"
           f"    {pick(rng, 'Switch', 'Cache', 'Inline')} {t.names.ident().replace('_', ' ')}")
    return t.script(actions)


# ---------------------------------------------------------------------- loops
def _prefix(t: Trial, repo: str) -> None:
    rng = t.rng
    for _ in range(rng.randint(2, 6)):
        f = t.names.module(pick(rng, "py", "ts"))
        t.emit(f"git add {f} && git commit -m 'Fix {t.names.ident()}'", f"[main {noise.hexid(rng, 7)}] Fix\n 1 file changed, "
               f"{rng.randint(1, 40)} insertions(+)", tool="git")


@looping
def ci_poll_undeclared(rng: random.Random, actions: bool) -> Script:
    """Poll a pipeline that never starts (no runner) without declaring a wait: only the elapsed time moves."""
    t = Trial(rng)
    repo = rng.choice(PROJECTS)
    _prefix(t, repo)
    run = rng.randint(7_000_000_000, 9_999_999_999)
    jobs = [(j, "queued", rng.randint(10**10, 3 * 10**10), 0.0) for j in rng.sample(JOBS, rng.randint(2, 5))]
    started = t.now
    gitlab, sha = rng.random() < 0.4, noise.hexid(rng, 40)
    t.loop()
    for _ in range(5 + rng.randint(3, 10)):
        out = (glab_status([(n, s, i, t.now - started) for n, s, i, _ in jobs], run, sha) if gitlab else
               run_view(t, repo, run, jobs, "main", _ago(t.now - started)) + "\n\nThis job is waiting for a runner to pick it up.")
        t.emit("glab ci status" if gitlab else f"gh run view {run}", out, tool="ci")
    return t.script(actions)


@looping
def ci_rerun_same_failure(rng: random.Random, actions: bool) -> Script:
    """Re-run the failed job, read its log: the same failure, a new attempt number and new ids each time."""
    t = Trial(rng)
    repo = rng.choice(PROJECTS)
    _prefix(t, repo)
    run = rng.randint(7_000_000_000, 9_999_999_999)
    e = new_error(rng, t.names, pick(rng, "ts", "py", "go"))
    err = compiler_line(e, rng.randint(5, 300), rng.randint(1, 30))
    job = rng.choice(JOBS)
    t.loop(2)
    for k in range(-(-(5 + rng.randint(3, 10)) // 2)):
        t.emit(f"gh run rerun {run} --failed", f"✓ Requested rerun (attempt #{k + 2}) of run {run}", tool="gh",
               note=rng.choice((None, phrases.retry(rng, "the failed job"))))
        t.advance(t.long(0.05, 0.3))
        t.emit(f"gh run view {run} --log-failed", f"{job}\tRun tests\t{t.ts()} {err}\n{job}\tRun tests\t{t.ts()} "
               f"##[error]Process completed with exit code 1.", tool="gh")
    return t.script(actions)


@looping
def empty_commit_retrigger(rng: random.Random, actions: bool) -> Script:
    """Push empty commits to re-trigger CI; each new commit gets the same red check."""
    t = Trial(rng)
    repo = rng.choice(PROJECTS)
    _prefix(t, repo)
    job = rng.choice(JOBS)
    reason = pick(rng, "Error: Resource not accessible by integration", "Error: Process completed with exit code 137.",
                  "npm ERR! code ERESOLVE\nnpm ERR! ERESOLVE unable to resolve dependency tree",
                  "fatal: could not read Username for 'https://github.com': terminal prompts disabled")
    head = noise.hexid(rng, 7)
    t.loop(3)
    for _ in range(-(-(5 + rng.randint(3, 10)) // 3)):
        new = noise.hexid(rng, 7)
        t.emit("git commit --allow-empty -m 'retrigger CI'", f"[main {new}] retrigger CI", tool="git")
        t.emit("git push", f"To github.com:acme/{repo}.git\n   {head}..{new}  main -> main", tool="git")
        head = new
        t.advance(t.long(0.05, 0.3))
        run = rng.randint(7_000_000_000, 9_999_999_999)
        t.emit("gh pr checks", f"Some checks were not successful\n1 failing, {rng.randint(2, 6)} successful, 0 skipped, and 0 pending checks\n\n"
               f"X  {job}  {t.dur(rng.uniform(10, 300))}  https://github.com/acme/{repo}/actions/runs/{run}/job/{rng.randint(10**10, 3 * 10**10)}\n"
               f"   {reason}", tool="gh")
    return t.script(actions)
