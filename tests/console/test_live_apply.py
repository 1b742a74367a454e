"""Ledger changes are applied at most every LIVE_APPLY_S (console/app.py ``ledger_changed``), and
the journal read that often (console/follow.py ``spacing_s``): a change after a quiet spell at
once, a burst's in frames LIVE_APPLY_S apart, nothing lost.

The spacing is what keeps a fleet's writes from costing the console a frame each: the
follower keeps merging reads into one pending delta while a frame is held."""

from __future__ import annotations

import asyncio
import random
import time
from contextlib import asynccontextmanager

import pytest

import console.app as console_app
from console.app import LIVE_APPLY_S
from store import Ledger, NodeSpec
from tests.support.console_app import build_ledger, make_app, settle, wait_for


def _calls(monkeypatch, obj, name: str, stamp) -> list[float]:
    """``obj.name`` wrapped: each call appends ``stamp()`` to the returned list, then runs."""
    seen: list[float] = []
    original = getattr(obj, name)

    def recorded(*a, **k):
        seen.append(stamp())
        return original(*a, **k)

    monkeypatch.setattr(obj, name, recorded)
    return seen


def _reads_started(monkeypatch, follower) -> list[float]:
    """When the follower's loop starts each journal read (``monotonic()``, the clock its spacing is
    held on), taken where it hands the read to a worker thread — not as the thread begins, which a
    loaded or merely busy machine starts a little late or early, moving one gap either way."""
    seen: list[float] = []
    real = asyncio.to_thread

    async def spy(func, /, *args, **kwargs):
        if getattr(func, "__self__", None) is follower and getattr(func, "__name__", "") == "read_step":
            seen.append(time.monotonic())
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", spy)
    return seen


def _count_applications(app, monkeypatch) -> list[float]:
    return _calls(monkeypatch, app, "apply_pending", lambda: console_app.monotonic())


@asynccontextmanager
async def _app_on_a_manual_clock(tmp_path, monkeypatch):
    """A settled console whose spacing reads ``mono[0]``; yields (pilot, app, mono, applied)."""
    app = make_app(build_ledger(tmp_path / "ledger.db"), analysis=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        mono = [1000.0]
        monkeypatch.setattr(console_app, "monotonic", lambda: mono[0])
        yield pilot, app, mono, _count_applications(app, monkeypatch)


async def test_a_change_after_a_quiet_spell_is_applied_at_once_and_a_burst_is_held(tmp_path, monkeypatch):
    async with _app_on_a_manual_clock(tmp_path, monkeypatch) as (pilot, app, mono, applied):
        app.ledger_changed()
        assert applied == [1000.0], "after a quiet spell the change is applied in the same call"
        mono[0] += LIVE_APPLY_S / 4
        app.ledger_changed()
        assert len(applied) == 2, "one change after a lone one is not held (the lone one may have shown nothing)"
        mono[0] += LIVE_APPLY_S / 4
        app.ledger_changed()
        app.ledger_changed()
        assert len(applied) == 2, "in a burst, within LIVE_APPLY_S of the last one, a change waits"
        await wait_for(pilot, lambda: len(applied) == 3, what="the held change")
        assert applied[2] == 1000.0 + LIVE_APPLY_S / 2, "one application for the held changes"
        mono[0] += 3 * LIVE_APPLY_S
        app.ledger_changed()
        assert len(applied) == 4, "quiet again: at once"
        mono[0] += LIVE_APPLY_S / 4
        app.ledger_changed()
        assert len(applied) == 5
        mono[0] -= 10.0  # a clock that went back never holds a change for long
        app.ledger_changed()
        assert len(applied) == 6


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_a_burst_of_writes_is_applied_in_spaced_frames_and_none_is_lost(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    path = build_ledger(tmp_path / "ledger.db")
    sizes = {f"b{i}": rng.randint(3, 12) for i in range(rng.randint(2, 6))}
    with Ledger.open(path) as led:
        for tid, n in sizes.items():
            led.create_task(tid, title=f"burst {tid}")
            led.add_nodes(tid, [NodeSpec(key=f"n{i:02d}") for i in range(n)])
    app = make_app(path, analysis=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        applied = _count_applications(app, monkeypatch)
        reads = _reads_started(monkeypatch, app.follower)
        want = {tid: rng.randint(1, n) for tid, n in sizes.items()}
        order = [tid for tid, k in want.items() for _ in range(k)]
        rng.shuffle(order)
        beats = [rng.random() < 0.5 for _ in order]
        with Ledger.open(path) as led:

            def work(tid: str, beat: bool) -> None:
                c = led.claim(tid, "w", lease_s=600)
                assert c is not None
                if beat:
                    led.heartbeat(c, units_done=1, units_total=2, observation=f"half of {c.node_key}")
                led.commit(c)

            for tid, beat in zip(order, beats):  # the loop runs (reads, applies) while each is written
                await asyncio.to_thread(work, tid, beat)

        def done(tid: str) -> int:
            return app.tasks_model.rows[app.tasks_model.index[tid]].view.counts.get("succeeded", 0)

        await wait_for(pilot, lambda: all(done(t) == k for t, k in want.items()), what="every commit in the rows")
        await settle(pilot)
        gaps = [b - a for a, b in zip(applied, applied[1:])]
        close = [i for i, g in enumerate(gaps) if g < LIVE_APPLY_S * 0.9]
        assert applied and not any(i + 1 in close for i in close), f"two quick applications in a row: {gaps}"
        gaps = sorted(b - a for a, b in zip(reads, reads[1:]))  # (in a burst every other gap is held at least)
        assert gaps and gaps[len(gaps) // 2] >= LIVE_APPLY_S * 0.9, f"journal reads for {len(order)} writes: {gaps}"


async def test_a_held_burst_is_applied_even_when_the_ui_thread_stalls_past_the_delay(tmp_path, monkeypatch):
    """Textual's one-shot timers "skip" their only tick when the clock moves on by more than
    their delay between two of its reads (a worker thread holding the interpreter does exactly
    that); a burst held on one was never applied and the console froze under a fleet's load, and
    a re-arming chain (the tick, the analysis timer, the alerts' next notification) would stop
    for good. Here every read of Textual's clock moves it on by a second (app.later is asyncio's)."""
    import textual._time as textual_time

    async with _app_on_a_manual_clock(tmp_path, monkeypatch) as (pilot, app, mono, applied):
        app.ledger_changed()
        mono[0] += LIVE_APPLY_S / 4
        app.ledger_changed()  # a second, at once: now a burst
        mono[0] += LIVE_APPLY_S / 4
        clock = textual_time.get_time
        jump = [0.0]

        def stalling() -> float:
            jump[0] += 1.0
            return clock() + jump[0]

        monkeypatch.setattr(textual_time, "get_time", stalling)
        app.ledger_changed()  # held
        assert len(applied) == 2
        await wait_for(pilot, lambda: len(applied) == 3, timeout=10, what="the held burst applied")
        ticks = _calls(monkeypatch, app.screen, "tick", time.monotonic)
        await wait_for(pilot, lambda: len(ticks) >= 2, timeout=10, what="the once-a-second tick, re-armed each time")


def test_the_console_draws_at_its_frame_rate_unless_the_operator_says_otherwise(monkeypatch):
    """``warden console`` / ``warden demo`` set Textual's TEXTUAL_FPS (read when Textual is
    imported) to console.cli.FRAME_RATE: after a frame Textual waits one to two periods before the
    next, so at its default 60 a change applied right after a key's frame waited up to 33 ms. Other
    commands (their children too: ``warden run -- CMD``) are left as they were; an operator's
    value wins."""
    import os

    import console.cli as cli
    from console.cli import entry

    seen: list[str | None] = []
    monkeypatch.setattr(entry, "main", lambda args: seen.append(os.environ.get("TEXTUAL_FPS")) or 0)
    monkeypatch.delenv("TEXTUAL_FPS", raising=False)
    for command in (["status"], ["run", "--", "true"], ["--version"], []):
        assert cli.main(command) == 0
        assert seen[-1] is None, command
    assert cli.main(["console", "--ledger", "x.db"]) == 0
    assert seen[-1] == cli.FRAME_RATE == "120"
    monkeypatch.setenv("TEXTUAL_FPS", "30")
    assert cli.main(["demo"]) == 0
    assert seen[-1] == "30"
