"""``warden notify --follow``: the journal read like the feed reads it, notices grouped, delivered durably.

One pass (:meth:`Notifier.step`) reads the events after the state's cursor (``store/reading/feed.py``:
a cursor, wake-ups only as hints), turns them into notices for the routes that take them, checks
the active tasks' alarms and budget gates every ``alarm_every_s`` (a stall is the absence of events,
so no event announces it), closes the bursts that are over into batches and sends what is due —
each step its own transaction in the state file (``store/notify/state.py``). Between passes it waits
for a wake-up of the feed or for the next thing due, whichever comes first.

The ledger is only read (opened read-only): the notifier cannot change what agents or operators do.
A ledger that cannot be reached stops reading, not sending: what is owed is still delivered.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from typing import Callable, Sequence

from store.clock import Clock
from store.errors import LedgerUnavailable, NotFound, WardenError
from store.notify import notices as nt
from store.notify.config import NotifyConfig, masked, url_id
from store.notify.deliver import send as apprise_send
from store.notify.state import NoticeRow, State
from store.reading.feed import Feed, passes
from store.storage.db import parse_target
from store.reading.signals import Signal, signals_for_task
from store.text import safe_line
from store.facade import Ledger
from store.views import EventView, TaskView

ALARM_EVERY_S = 15.0
UNAVAILABLE_RETRY_S = 5.0
READ_BATCH = 2000
Sender = Callable[[str, str, str, "str | None"], "str | None"]


def _task_signals(led: Ledger, *, task: TaskView, now: float) -> list[Signal]:
    return signals_for_task(led, task, now=now)


def _send(url: str, title: str, body: str, click: str | None) -> str | None:
    return apprise_send(url, title, body, click=click)


class Notifier:
    """Follows one ledger for one configuration; ``say`` gets a line for each thing done (the CLI prints it)."""

    def __init__(self, target: str, cfg: NotifyConfig, state: State, *, clock: Clock = time.time,
                 say: Callable[[str], None] | None = None, alarm_every_s: float = ALARM_EVERY_S,
                 sender: Sender = _send, fallback_poll_s: float = 2.0) -> None:
        self.target = target
        self.cfg = cfg
        self.state = state
        self.clock = clock
        self.say = say or (lambda line: None)
        self.alarm_every_s = alarm_every_s
        self.sender = sender
        self.feed = Feed(target, read_only=True, application_name="warden-notify", fallback_poll_s=fallback_poll_s)
        self.display = parse_target(target).display
        self.next_alarms = 0.0
        self.unavailable: str | None = None

    # ------------------------------------------------------------------ reading
    def begin(self) -> None:
        """At start: deliveries cut off mid-send are marked uncertain; a new state starts at the
        journal's end, with what is open now (handoffs, alarms) told once."""
        now = self.clock()
        n = self.state.interrupted(now)
        if n:
            self.say(f"{n} message{'s' if n != 1 else ''} were being sent when the notifier stopped: "
                     "marked uncertain, not sent again (warden notify --status)")
        if self.state.cursor() is None:
            cursor = self.feed.last_event_id()
            facts = [nt.handoff_fact(h) for h in self.feed.read(lambda led: led.handoffs(status="open"))]
            self.state.take(nt.route(facts, self.cfg, now), cursor)
            self.next_alarms = 0.0

    def read(self) -> bool:
        """New journal events → notices (one transaction with the cursor). True when more are waiting."""
        cursor = self.state.cursor() or 0
        delta = self.feed.since(cursor, limit=READ_BATCH)
        if not delta.events:
            return False
        now = self.clock()
        facts: list[nt.Fact] = []
        for e in delta.events:
            fact = self._fact(e)
            if fact is not None:
                facts.append(fact)
        self.state.take(nt.route(facts, self.cfg, now), delta.cursor)
        return delta.more

    def _fact(self, e: EventView) -> nt.Fact | None:
        hid = nt.opened_handoff(e)
        if hid is None:
            return nt.event_fact(e)
        try:
            return nt.handoff_fact(self.feed.read(lambda led: led.handoff(hid)))
        except NotFound:
            return None

    def check_alarms(self) -> None:
        """Alarms and budget gates of the active tasks, told once each (``notices.signal_changes``)."""
        now = self.clock()
        tasks = [t for t in self.feed.read(lambda led: led.tasks()) if t.status in ("active", "parked")]
        signals: list[Signal] = []
        for t in tasks:
            signals.extend(self.feed.read(functools.partial(_task_signals, task=t, now=now)))
        facts, seen, gone = nt.signal_changes(signals, [t.task_id for t in tasks], self.state.watched(), now)
        if facts or seen or gone:
            self.state.take(nt.route(facts, self.cfg, now), self.state.cursor() or 0, watch=seen, gone=gone)

    # ------------------------------------------------------------------ grouping and sending
    def group(self) -> float | None:
        """Close the bursts that are over into batches; the next time one may be, or None."""
        now = self.clock()
        by_route: dict[str, list[NoticeRow]] = {}
        for n in self.state.waiting():
            by_route.setdefault(n.route, []).append(n)
        later: list[float] = []
        for name, waiting in by_route.items():
            r = self.cfg.route(name)
            if r is None:  # a route no longer configured: its notices are batched with no destination
                self.state.make_batch(name, [n.id for n in waiting], [], now)
                continue
            when = nt.burst_over(waiting, self.cfg, self.state.last_batch_at(name), r.quiet_s, now)
            if when is not None:
                later.append(when)
                continue
            self.state.make_batch(name, [n.id for n in waiting], [(url_id(u), masked(u)) for u in r.to], now)
        return min(later) if later else None

    def deliver(self) -> None:
        """Send every delivery that is due, one at a time, each marked before it is sent."""
        for d in self.state.due(self.clock()):
            url = self.cfg.destination(d.route, d.dest)
            if url is None:
                self.state.finished(d.id, "dropped", self.clock(),
                                    error="its destination is no longer configured")
                continue
            notices = self.state.batch_notices(d.batch_id)
            links = self._links(notices, d.route)
            base = self.cfg.link_base
            title, body = nt.render(notices, links, ledger=self.display,
                                    list_link=f"{base}/m/" if base else None)
            click = links.get(notices[0].handoff_id or "") if len(links) == 1 else (f"{base}/m/" if base else None)
            if not self.state.sending(d.id, self.clock()):
                continue
            error = self.sender(url, title, body, click)
            now = self.clock()
            if error is None:
                self.state.finished(d.id, "sent", now)
                self.say(f"sent to {d.shown} ({d.route}): {title}")
                continue
            first, longest = self.cfg.retry
            wait = min(longest, first * 2 ** max(0, d.attempts))
            if now - self.state.batch_made_at(d.batch_id) >= self.cfg.give_up_s:
                self.state.finished(d.id, "failed", now, error=error)
                self.say(f"gave up on {d.shown} ({d.route}) after {d.attempts + 1} tries: {error}")
            else:
                self.state.finished(d.id, "retrying", now, error=error, next_at=now + wait)
                self.say(f"could not send to {d.shown} ({d.route}), again in {wait:.0f}s: {error}")

    def _links(self, notices: Sequence[NoticeRow], route: str) -> dict[str, str]:
        """A fresh single-use link per handoff in the message (none without a link base)."""
        base = self.cfg.link_base
        if not base:
            return {}
        now = self.clock()
        out: dict[str, str] = {}
        for n in notices[: nt.BATCH_LINES]:
            if n.handoff_id is not None and n.handoff_id not in out:
                token = self.state.mint(n.handoff_id, route, now, self.cfg.link_ttl_s)
                out[n.handoff_id] = f"{base}/m/h/{n.handoff_id}#k={token}"
        return out

    # ------------------------------------------------------------------ the loop
    def step(self) -> float:
        """One pass; the seconds until something is due (at most the alarm period)."""
        now = self.clock()
        try:
            while self.read():
                pass
            if now >= self.next_alarms:
                self.check_alarms()
                self.next_alarms = now + self.alarm_every_s
            if self.unavailable is not None:
                self.say("the ledger answers again")
                self.unavailable = None
        except LedgerUnavailable as e:
            if self.unavailable is None:
                self.say(f"cannot read the ledger ({safe_line(str(e), limit=200)}): still sending what is owed")
            self.unavailable = str(e)
        except WardenError as e:
            self.say(f"reading the ledger failed: {safe_line(str(e), limit=200)}")
        next_group = self.group()
        self.deliver()
        now = self.clock()
        waits = [self.next_alarms - now, UNAVAILABLE_RETRY_S if self.unavailable else self.alarm_every_s]
        if next_group is not None:
            waits.append(next_group - now)
        due = self.state.next_due()
        if due is not None:
            waits.append(due - now)
        return max(0.0, min(waits))

    async def run(self, stop: asyncio.Event) -> None:
        """Pass after pass until ``stop`` is set; a feed wake-up starts the next pass early (not while
        the ledger cannot be read: the retry waits its time)."""
        await passes(self.feed, stop, self.begin, self.step, hold=lambda: self.unavailable is not None)




class Background:
    """A notifier in a thread of its own (``warden console`` with ``console = true`` in the
    configuration): it follows while the console runs and stops with it. When another notifier
    already follows the same state it does nothing (that one sends)."""

    def __init__(self, target: str, cfg: NotifyConfig, state: State) -> None:
        self.notifier = Notifier(target, cfg, state)
        self.state = state
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stop_event: asyncio.Event | None = None
        self.ready = threading.Event()
        self.running = False
        self.thread = threading.Thread(target=self._main, name="warden-notify", daemon=True)

    def start(self) -> bool:
        """Start following; False when another notifier follows this state already."""
        self.thread.start()
        self.ready.wait(30)
        return self.running

    def _main(self) -> None:
        with self.state.follower() as mine:
            self.running = mine
            if not mine:
                self.ready.set()
                return

            async def main() -> None:
                self.loop = asyncio.get_running_loop()
                self.stop_event = asyncio.Event()
                self.ready.set()
                await self.notifier.run(self.stop_event)

            try:
                asyncio.run(main())
            except WardenError:
                pass  # the ledger went away: what is owed stays in the state for the next notifier
            finally:
                self.ready.set()

    def stop(self, timeout: float = 10.0) -> None:
        if self.loop is not None and self.stop_event is not None:
            self.loop.call_soon_threadsafe(self.stop_event.set)
        self.thread.join(timeout)
        self.state.close()


__all__ = ["Notifier", "Background", "ALARM_EVERY_S"]
