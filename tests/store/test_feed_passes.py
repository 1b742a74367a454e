"""A follower's passes on the feed (store/reading/feed.py ``passes``): a wake-up starts the next pass
early, except while the follower backs off — a ledger that cannot be read (a missing file wakes its
watcher over and over) must not make `warden notify` or `warden otel export --follow` spin."""

from __future__ import annotations

import asyncio

from store.reading.feed import passes


class Storm:
    """A feed whose wake-ups never stop."""

    def __init__(self) -> None:
        self.closed = False

    async def wakeups(self):
        while True:
            await asyncio.sleep(0.001)
            yield None

    def close(self) -> None:
        self.closed = True


def run(hold: bool, wait_s: float, passes_wanted: int) -> tuple[int, Storm]:
    feed = Storm()
    steps = [0]

    async def main() -> None:
        stop = asyncio.Event()

        def step() -> float:
            steps[0] += 1
            if steps[0] >= passes_wanted:
                stop.set()
            return wait_s

        await asyncio.wait_for(passes(feed, stop, lambda: None, step, hold=lambda: hold), timeout=120)  # type: ignore[arg-type]

    asyncio.run(main())
    return steps[0], feed


def test_a_wake_up_starts_the_next_pass_early() -> None:
    # a pass due in an hour: only the wake-ups can bring 20 passes within the bound
    steps, feed = run(hold=False, wait_s=3600.0, passes_wanted=20)
    assert steps == 20 and feed.closed


def test_while_held_the_wake_ups_wait_for_the_pass_that_is_due() -> None:
    loop_steps: list[int] = []

    async def main() -> None:
        feed = Storm()
        stop = asyncio.Event()
        count = [0]

        def step() -> float:
            count[0] += 1
            return 0.2

        task = asyncio.create_task(passes(feed, stop, lambda: None, step, hold=lambda: True))  # type: ignore[arg-type]
        await asyncio.sleep(1.0)
        stop.set()
        await asyncio.wait_for(task, timeout=60)
        loop_steps.append(count[0])
        assert feed.closed

    asyncio.run(main())
    # 1 s of a storm of wake-ups, a pass due every 0.2 s: about 5 passes, never hundreds
    assert 1 <= loop_steps[0] <= 10, loop_steps
