"""What a console's follower was woken for and what each of its journal reads brought, recorded
from outside: the feed's ``wakeups`` and the follower's ``read_step`` are wrapped on these two
instances (nothing in the product keeps a record for tests).

    log = FollowerLog(app)            # before the app runs: the follower starts its feed then
    ...
    log.wakeups                       # every reason the feed yielded, in order
    log.deliveries["settle"]          # events read by a read that a "settle" wake-up led to
    log.reads                         # journal reads done
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any, AsyncGenerator


def delivered_by(reasons: set[str]) -> str:
    """Which path brought a read: a notification (``change``), a follow-up check that saw a commit
    land after its last file event (``settle``), the feed starting (``start``), only the fallback
    poll (``poll``), or none of the feed's wake-ups (``other``: a screen's request)."""
    for r in ("change", "settle", "start", "poll"):
        if r in reasons:
            return r
    return "other"


class FollowerLog:
    def __init__(self, app: Any) -> None:
        self.wakeups: list[str] = []
        self.deliveries: Counter[str] = Counter()
        self.reads = 0
        self._since: set[str] = set()  # the reasons yielded since the last read began
        self._lock = threading.Lock()
        feed, follower = app.feed, app.follower
        real_wakeups, real_read = feed.wakeups, follower.read_step

        async def wakeups(**kwargs: Any) -> AsyncGenerator[str, None]:
            it = real_wakeups(**kwargs)
            try:
                async for reason in it:
                    with self._lock:
                        self.wakeups.append(reason)
                        if reason != "lost":  # (the follower reads nothing on it)
                            self._since.add(reason)
                    yield reason
            finally:
                await it.aclose()

        def read_step(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                woken, self._since = self._since, set()
            step = real_read(*args, **kwargs)
            if step is not None:
                with self._lock:
                    self.reads += 1
                    if step.events:
                        self.deliveries[delivered_by(woken)] += len(step.events)
            return step

        feed.wakeups = wakeups
        follower.read_step = read_step
