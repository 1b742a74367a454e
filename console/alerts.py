"""Alerts: what reaches an operator who is looking elsewhere (docs/console.md, "Alerts").

Two things raise an alert while the console is open:

* a **handoff opened** (an agent asked for a human: a ``handoff.opened`` event read by the feed);
* a **signal turning alarm** (a stall, an orphaned lease, a budget at ``stop``: a signal whose
  severity is ``alarm`` where the previous analysis of its task had it absent or milder).

:class:`AlertWatch` is the pure part: it diffs what the model learns (events, each task's signals)
against what it has seen and returns the new :class:`Alert` objects; it never touches Textual, a
terminal or a process, and is unit-tested as such. Its rules:

* **Debounced**: one alert per handoff, and one per node entering alarm (a task-level signal,
  such as a budget at ``stop``, counts as the task's own "node"). While the node stays in alarm —
  repaints, further analyses, a second alarm kind on the same node (a loop is ``repeating`` and
  then ``no_new_info``), a restart of the feed — nothing alerts again. A node whose alarm ended
  alerts again only after staying quiet for ``REARM_S`` (5 minutes of the console's clock), so a
  signal that flickers off and on is one alert.
* **Startup is the baseline**: what is already true when the console opens (open handoffs,
  alarms in the first analysis of each task present at load) rings nothing — the task list shows
  it with ✋ and ⚠. A task created after the console opened has no baseline: its alarms alert.
* **Open until seen**: an alert counts in the header until the operator opens its node's detail,
  its task's graph, or (for a handoff) the handoff inbox; or marks every alert seen (command
  palette). A handoff resolved or withdrawn (by anyone) is no longer counted: it was dealt with.
  A stall that ended by itself still counts: it happened while nobody looked.
* **The bell rings at most once every** ``BELL_EVERY_S`` (10 s), and a notification shows at most
  that often too (the next one lists what came meanwhile): ten loops starting within a few seconds
  are one ring, two notifications, ten hook runs and a count of ten.
* **A notification never covers a dialog.** While a dialog (any modal screen: an action's
  confirmation, the command palette) is open, new alerts wait — the header counts them ("2
  waiting") — and a notification on screen when a dialog opens is taken down and waits with them;
  when the dialog closes, one notification lists what waited. The bell and the hook do not wait.

:class:`AlertDesk` is the glue the app holds: it feeds the watch from the app's deltas and
analysis results and delivers each batch of new alerts — the terminal bell (unless ``--no-bell``;
at most every ``BELL_EVERY_S``), one notification naming task and node (literal text; at most
every ``BELL_EVERY_S``, gathering a burst), the header count, and the ``--on-alert`` hook, run in
a thread worker with the alert as one JSON object on stdin (:func:`run_hook`), never blocking the
UI.
"""

from __future__ import annotations

import functools
import dataclasses
import json
import os
import select
import signal as signals_mod
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Protocol, Sequence

from textual.dom import DOMNode
from textual.screen import ModalScreen, Screen

from store.actions.resolve import ResolveParams
from store.clock import iso
from store.storage.events import OPERATOR, HandoffOpened, OperatorActed, payload_of
from store.jsontypes import JsonObject
from store.views import EventView

from .glyphs import MARKS
from .text import safe, safe_line

RESOLVED = OperatorActed.kind_of(ResolveParams.action)

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel
    from textual.signal import Signal

    from .follow import Pending
    from .model import EtaJson, SignalJson

BELL_EVERY_S = 10.0  # the bell rings at most this often (the console's clock)
REARM_S = 300.0  # a node whose alarm ended alerts again only if it stayed quiet this long (no flicker)
HOOK_TIMEOUT_S = 10.0  # an --on-alert command still running after this is killed (and reported)
HOOKS_AT_ONCE = 4  # --on-alert commands running at the same time (a burst of alerts waits its turn)
HOOK_STDERR_TAIL = 4096  # bytes of a failing hook's stderr kept (its last line is shown); the rest is dropped
NOTIFY_AT_MOST = 3  # alerts a batch's notification lists; the rest is one "and N more" line


@dataclass(frozen=True)
class Alert:
    """One thing the operator should know about now. ``to_json`` is the hook's stdin."""

    kind: str  # "handoff" | "signal"
    task: str
    node: str | None
    signal: str | None  # the signal's kind (``repeating``, ``orphaned``, …); None for a handoff
    severity: str  # "alarm" for a signal; for a handoff, "alarm" too (somebody waits on a human)
    at: float  # when the console raised it
    summary: str  # one line, as the notification says it (agent text included, unescaped here)
    since: str | None = None  # the signal's since / the handoff's opening time (ISO UTC)
    handoff: str | None = None  # the handoff's id
    evidence: str = ""  # the signal's evidence, or the handoff's question
    event_id: int | None = None  # the journal event that raised it (a handoff)
    ledger: str | None = None  # with several ledgers open, the short name of the one it is in

    @property
    def key(self) -> tuple[str, str, str]:
        """What "the same alert" means for seen-marking: per handoff, or per node and signal kind."""
        if self.kind == "handoff":
            return ("handoff", self.task, self.handoff or "")
        return (self.task, self.node or "", "signal")

    def to_json(self) -> JsonObject:
        return {"kind": self.kind, "task": self.task, "node": self.node, "signal": self.signal,
                "severity": self.severity, "at": iso(self.at), "since": self.since, "summary": self.summary,
                "handoff": self.handoff, "evidence": self.evidence, "ledger": self.ledger}

    def line(self, limit: int = 200) -> str:
        """The notification's line: the task and node named, made safe (shown with markup=False)."""
        where = safe_line(self.task) + (f"/{safe_line(self.node)}" if self.node else "")
        glyph = MARKS["handoff"] if self.kind == "handoff" else MARKS["signal"]
        return f"{glyph} {where}: {safe_line(self.summary, limit=limit)}"


def _iso(value: str | float | None) -> str | None:
    """A signal's ``since`` as the console gets it (an ISO string from signal_json, or seconds)."""
    if value is None or isinstance(value, str):
        return value
    return iso(float(value))


@dataclass
class AlertWatch:
    """The pure diff: model state in, new alerts out (see the module's docstring)."""

    baseline: set[str] = field(default_factory=set)  # tasks whose next signals are the startup state
    known: set[str] = field(default_factory=set)  # tasks the watch has heard of
    alarming: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # (task, node) → alarm kinds
    cleared_at: dict[tuple[str, str], float] = field(default_factory=dict)  # when a node's alarm ended
    handoffs: set[tuple[str, str]] = field(default_factory=set)  # (task, handoff id) alerted already
    last_event: int = 0
    open: dict[tuple[str, str, str], Alert] = field(default_factory=dict)  # not seen, not over

    # --- what the model learns
    def loaded(self, task_ids: Iterable[str]) -> None:
        """Every task as the feed (re)loaded them: those not heard of before are startup state."""
        for tid in task_ids:
            if tid not in self.known:
                self.known.add(tid)
                self.baseline.add(tid)

    def events(self, events: Sequence[EventView], now: float) -> list[Alert]:
        """New journal events: a handoff opened alerts; a resolved or withdrawn one is over."""
        out: list[Alert] = []
        for e in events:
            if e.id <= self.last_event:
                continue  # read again (a restarted feed): already judged
            self.last_event = e.id
            if e.task_id is not None and e.task_id not in self.known:
                self.known.add(e.task_id)  # created while the console is open: no baseline
            payload = payload_of(e)
            if e.kind == HandoffOpened.KIND and e.task_id:
                hid = payload.handoff if isinstance(payload, HandoffOpened) else ""
                if (e.task_id, hid) in self.handoffs:
                    continue
                self.handoffs.add((e.task_id, hid))
                what = e.summary.removeprefix(f"{e.node} ") if e.node else e.summary
                a = Alert("handoff", e.task_id, e.node, None, "alarm", now, what, since=iso(e.at),
                          handoff=hid or None, evidence=e.summary, event_id=e.id)
                self.open[a.key] = a
                out.append(a)
            elif e.kind.startswith(OPERATOR):
                gone = set(payload.handoffs_withdrawn) if isinstance(payload, OperatorActed) else set()
                for k, a in list(self.open.items()):
                    if a.kind != "handoff" or a.task != e.task_id:
                        continue
                    if a.handoff in gone or (e.kind == RESOLVED and a.node == e.node):
                        del self.open[k]
        return out

    def signals(self, task_id: str, signals: Sequence[SignalJson] | None, now: float) -> list[Alert]:
        """A task's signals as one analysis computed them (the whole list for that task; None: not
        computed this time). Returns an alert for each node (or the task itself) that entered alarm."""
        if signals is None:
            return []
        quiet = task_id in self.baseline
        self.baseline.discard(task_id)
        self.known.add(task_id)
        current: dict[tuple[str, str], list[SignalJson]] = {}
        for s in signals:
            if s.get("severity") == "alarm":
                current.setdefault((task_id, s.get("node") or ""), []).append(s)
        for k in [k for k in self.alarming if k[0] == task_id and k not in current]:
            del self.alarming[k]  # over (or milder); its alert stays open until seen: it happened
            self.cleared_at[k] = now
        out: list[Alert] = []
        for k, sigs in current.items():
            kinds = {str(s.get("kind")) for s in sigs}
            if k in self.alarming:  # still in alarm (perhaps for one more reason): no news
                self.alarming[k] |= kinds
                continue
            self.alarming[k] = kinds
            cleared = self.cleared_at.pop(k, None)
            if quiet or (cleared is not None and now - cleared < REARM_S):
                continue  # the startup state; or a flicker (off for a moment, then on again)
            first = sigs[0]
            kind = str(first.get("kind"))
            more = f" (+{len(sigs) - 1} more)" if len(sigs) > 1 else ""
            a = Alert("signal", task_id, k[1] or None, kind, "alarm", now,
                      f"{kind} (alarm): {first.get('evidence') or ''}{more}", since=_iso(first.get("since")),
                      evidence=str(first.get("evidence") or ""))
            self.open[a.key] = a
            out.append(a)
        return out

    # --- what the operator has seen
    def seen(self, task_id: str, node: str | None = None) -> None:
        """The operator opened this task's graph (``node`` None) or this node's detail."""
        for k, a in list(self.open.items()):
            if a.task == task_id and (node is None or a.node == node):
                del self.open[k]

    def seen_handoffs(self) -> None:
        for k, a in list(self.open.items()):
            if a.kind == "handoff":
                del self.open[k]

    def seen_all(self) -> None:
        self.open.clear()

    @property
    def open_count(self) -> int:
        return len(self.open)


def notification(alerts: Sequence[Alert]) -> str:
    """One notification for a batch (a toast per alert would cover an 80×24 screen): a line per
    alert, at most ``NOTIFY_AT_MOST``, then how many more (the header counts them all)."""
    lines = [a.line(limit=60) for a in alerts[:NOTIFY_AT_MOST]]
    if len(alerts) > NOTIFY_AT_MOST:
        lines.append(f"and {len(alerts) - NOTIFY_AT_MOST} more")
    return "\n".join(lines)


# ---------------------------------------------------------------------- the hook
def run_hook(argv: Sequence[str], alert: Alert, *, timeout: float = HOOK_TIMEOUT_S) -> str | None:
    """Run ``argv`` (no shell) with the alert as one JSON object (and a newline) on stdin; its
    output is discarded (it must not reach the console's terminal). Returns None when it exited 0,
    else one line saying what went wrong (its stderr's last line). Killed, with its process group,
    after ``timeout``. Of its stderr only the last ``HOOK_STDERR_TAIL`` bytes are ever held (a hook
    that floods stderr costs the console no memory)."""
    data = (json.dumps(alert.to_json(), ensure_ascii=True) + "\n").encode()
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, close_fds=True, start_new_session=True)
    except OSError as e:
        return f"--on-alert {argv[0]}: {e.strerror or type(e).__name__}"
    deadline = time.monotonic() + timeout
    assert proc.stdin is not None and proc.stderr is not None
    try:
        proc.stdin.write(data)  # a few hundred bytes: the pipe takes them whether the hook reads or not
    except OSError:
        pass  # it exited, or closed its stdin: its exit status says the rest
    finally:
        try:
            proc.stdin.close()
        except OSError:
            pass
    err = _stderr_tail(proc, proc.stderr.fileno(), deadline)
    try:
        # waited for before its stderr is closed: a hook still writing at the deadline would die
        # of the closed pipe in the meantime and read as one that exited by itself
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signals_mod.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
        proc.wait()
        proc.stderr.close()
        return f"--on-alert {argv[0]}: still running after {timeout:g}s, killed"
    proc.stderr.close()
    # What it left running in its process group (``sh -c 'notify &'``) ends with it: a console
    # running for days must not gather one stray process per alert, nor leave them when it quits.
    # (The group's id stays reserved while any member lives, so this reaches only the hook's own.)
    try:
        os.killpg(proc.pid, signals_mod.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.returncode != 0:
        lines = [ln for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()]
        last = f": {safe_line(lines[-1].strip(), limit=200)}" if lines else ""
        return f"--on-alert {argv[0]}: exited {proc.returncode}{last}"
    return None


def _stderr_tail(proc: subprocess.Popen[bytes], fd: int, deadline: float) -> bytes:
    """Read ``fd`` until its end or ``deadline`` (or the hook has exited and nothing more comes: a
    child of its may hold the pipe), keeping only its last HOOK_STDERR_TAIL bytes."""
    kept = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return bytes(kept)
        ready, _, _ = select.select([fd], [], [], min(left, 0.2))
        if not ready:
            if proc.poll() is not None:
                return bytes(kept)
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            return bytes(kept)
        kept += chunk
        if len(kept) > HOOK_STDERR_TAIL:
            del kept[:-HOOK_STDERR_TAIL]


# ---------------------------------------------------------------------- the app's side
class AlertApp(Protocol):
    """What the desk uses of the app (console.app.WardenApp): Textual's public API and two of its own."""

    @property
    def screen_change_signal(self) -> Signal[Screen[object]]: ...
    def now(self) -> float: ...
    def alerts_changed(self) -> None: ...
    def bell(self) -> None: ...
    def clear_notifications(self) -> None: ...
    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None: ...
    def later(self, delay: float, callback: Callable[[], object]) -> None: ...
    def run_worker(self, work: Callable[[], None], *, group: str, exit_on_error: bool, thread: bool) -> object: ...
    def call_from_thread(self, callback: Callable[..., object], *args: object, **kwargs: object) -> object: ...


class AlertDesk:
    """What the app holds: the watch, and the delivery of each batch (bell, notifications, header,
    hook). ``app`` is the Textual app (only its public API is used)."""

    def __init__(self, app: AlertApp, *, bell: bool = True, hook: Sequence[str] | None = None,
                 hook_timeout: float = HOOK_TIMEOUT_S, ledger: str | None = None) -> None:
        self.app = app
        self.ledger = ledger  # named in the hook's JSON (several ledgers open; None with one)
        self.watch = AlertWatch()
        self.bell = bell
        self.hook = list(hook) if hook else None
        self.hook_timeout = hook_timeout
        self._rang_at: float | None = None
        self._shown_at: float | None = None
        self._unshown: list[Alert] = []  # alerts raised during a burst, for the next notification
        self._show_armed = False
        self._hook_slots = threading.BoundedSemaphore(HOOKS_AT_ONCE)
        self._shown: list[Alert] = []  # the batch the last notification showed (taken down by a dialog)
        self._held = False  # a dialog is open: notifications wait for it to close
        self._watching = False  # subscribed to the app's screen changes

    @property
    def open_count(self) -> int:
        return self.watch.open_count

    @property
    def waiting(self) -> int:
        """Alerts whose notification waits for an open dialog to close (the header says so)."""
        return len(self._unshown) if self._held else 0

    def _dialog_open(self) -> bool:
        return isinstance(getattr(self.app, "screen", None), ModalScreen)

    def _watch_screens(self) -> None:
        """Subscribe once to the app's screen changes (a dialog opening or closing), when it runs."""
        if self._watching or not getattr(self.app, "is_running", False) or not isinstance(self.app, DOMNode):
            return
        self._watching = True
        self.app.screen_change_signal.subscribe(self.app, self._screen_changed)

    def _screen_changed(self, screen: Screen[object]) -> None:
        if isinstance(screen, ModalScreen):
            if self._shown and self._shown_at is not None and self.app.now() - self._shown_at < BELL_EVERY_S:
                # the notification on screen would cover the dialog: take it down, show it afterwards
                self.app.clear_notifications()
                self._unshown = self._shown + [a for a in self._unshown if a not in self._shown]
                self._shown = []
            if self._unshown and not self._held:
                self._held = True
                self.app.alerts_changed()
        elif self._held:
            self._held = False
            self._shown_at = None  # what waited is shown now, not after the rate limit
            self._show()
            self.app.alerts_changed()

    def took(self, pending: Pending) -> None:
        """A delta the app just applied (``console.follow.Pending``)."""
        before = self.watch.open_count
        if pending.all_tasks is not None:
            self.watch.loaded(t.task_id for t in pending.all_tasks)
            if pending.tail is not None:  # what happened before the console (re)loaded is no news; the
                # cursor restarts at the tail's end (a replaced ledger file may number its events anew)
                self.watch.last_event = pending.tail[-1].id if pending.tail else 0
        new = self.watch.events(pending.events, self.app.now()) if pending.events else []
        self._deliver(new, before)

    def analysed(self, tasks: Mapping[str, tuple[EtaJson | None, Sequence[SignalJson] | None]]) -> None:
        """An analysis result (``AnalysisReady.tasks``: task id → (eta, signals or None))."""
        before = self.watch.open_count
        now = self.app.now()
        new: list[Alert] = []
        for tid, (_, sigs) in tasks.items():
            new.extend(self.watch.signals(tid, sigs, now))
        self._deliver(new, before)

    def seen(self, task_id: str, node: str | None = None) -> None:
        before = self.watch.open_count
        self.watch.seen(task_id, node)
        self._deliver([], before)

    def seen_handoffs(self) -> None:
        before = self.watch.open_count
        self.watch.seen_handoffs()
        self._deliver([], before)

    def seen_all(self) -> None:
        before = self.watch.open_count
        self.watch.seen_all()
        self._deliver([], before)

    def _deliver(self, new: list[Alert], before: int) -> None:
        self._watch_screens()
        if new:
            now = self.app.now()
            if self.bell and (self._rang_at is None or now - self._rang_at >= BELL_EVERY_S):
                self._rang_at = now
                self.app.bell()  # once per batch, and not again within BELL_EVERY_S
            self._unshown.extend(new)
            wait = 0.0 if self._shown_at is None else BELL_EVERY_S - (now - self._shown_at)
            if wait <= 0:
                self._show()
            elif not self._show_armed:  # a burst: the next notification gathers what came meanwhile
                self._show_armed = True
                self.app.later(wait, self._show)
            if self.hook:
                for a in new:
                    self.app.run_worker(functools.partial(self._run_hook, a), thread=True, group="alert-hook",
                                        exit_on_error=False)
        if new or self.watch.open_count != before:
            self.app.alerts_changed()

    def _show(self) -> None:
        """One notification for what is not shown yet (at most one every ``BELL_EVERY_S``), unless
        a dialog is open: then it waits for the dialog to close (:meth:`_screen_changed`)."""
        self._show_armed = False
        if not self._unshown:
            return
        if self._dialog_open():
            if not self._held:
                self._held = True
                self.app.alerts_changed()
            return
        batch, self._unshown = self._unshown, []
        self._shown = batch
        self._shown_at = self.app.now()
        title = f"{MARKS['alert']} {len(batch)} alert{'s' if len(batch) > 1 else ''}"
        self.app.notify(safe(notification(batch)), title=safe_line(title), severity="warning", timeout=BELL_EVERY_S,
                        markup=False)

    def _run_hook(self, alert: Alert) -> None:
        assert self.hook is not None
        with self._hook_slots:
            problem = run_hook(self.hook, dataclasses.replace(alert, ledger=self.ledger), timeout=self.hook_timeout)
        if problem:
            try:
                self.app.call_from_thread(self.app.notify, safe_line(problem, limit=300), title="alert hook",
                                          severity="error", timeout=10, markup=False)
            except RuntimeError:
                pass  # the app is closing


__all__ = ["Alert", "AlertDesk", "AlertWatch", "BELL_EVERY_S", "HOOK_TIMEOUT_S", "REARM_S", "run_hook"]
