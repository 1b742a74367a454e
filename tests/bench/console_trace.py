"""Run ``warden`` with a timeline of the console's live path written to ``$WARDEN_BENCH_TRACE``.

    WARDEN_BENCH_TRACE=/tmp/t.log python tests/bench/console_trace.py console --ledger L --runs R

bench_fleet.py ``--trace FILE`` starts the console this way. Each line is ``<CLOCK_MONOTONIC s>
<thread> <what> [detail]``, the clock the benchmark stamps its writes with, so a slow write can be
laid beside what the console was doing then: the wake-ups (``wake:<reason>``; ``wake:file``, a
file event; ``wake:check``/``wake:check_moved``, the commit probe's checks), journal reads (``read>``/``read<`` with the thread's CPU time; inside them ``since`` and
``tally``), a delta posted to the app (``changed``), deltas applied (``apply>``/``apply<``), the once-a-second ``tick``, analysis runs
sent to the worker process (``analyse>``: kind and tasks), a graph's pages (``page-read``: read by the
loading thread; ``page-start``/``page-extend``: applied on the UI thread; ``page-ack``: the UI's go-ahead for the next) and their results applied (``analysed>``/``analysed<``
with the run's time in the worker), keys, frames (``frame>``/``frame<``: the compositor's update) and
every write to the terminal (``out`` bytes), and every garbage collection of the oldest generation
or longer than 5 ms (``gc`` generation, ms, objects it walked). ``WARDEN_BENCH_HEAP=none`` runs the
console without its ``gc.freeze`` after the first screen, ``threshold:A,B,C`` with those collector
thresholds instead (to measure what the freeze is for). With ``WARDEN_BENCH_GIL_PROBE=1``, a thread that
sleeps 2 ms at a time notes each wake-up later than 4 ms (``late``) with where every other thread
was then (``at``): who held the interpreter.

A benchmark aid only: the patches wrap methods in place (no behaviour changes), and cost a few
microseconds an event.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

_out = open(os.environ["WARDEN_BENCH_TRACE"], "a", buffering=1 << 16)
_lock = threading.Lock()


def note(what: str, detail: object = "") -> None:
    line = f"{time.monotonic():.6f} {threading.current_thread().name} {what} {detail}\n"
    with _lock:
        _out.write(line)


def wrap(owner: type, name: str, label: str, detail=None) -> None:
    fn = getattr(owner, name)

    @functools.wraps(fn)
    def traced(*args, **kwargs):
        note(label + ">", detail(*args, **kwargs) if detail else "")
        cpu = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            note(label + "<", f"cpu {1000 * (time.thread_time() - cpu):.1f} ms")

    setattr(owner, name, traced)


def flush_every_second() -> None:
    while True:
        time.sleep(1.0)
        with _lock:
            _out.flush()


def gil_probe() -> None:
    """WARDEN_BENCH_GIL_PROBE=1: a thread that sleeps 2 ms at a time; a wake-up later than 4 ms
    (the interpreter lock, or the CPU, was not to be had) is noted with where every other thread
    was then (``late`` ms, then ``at`` lines)."""
    import traceback  # noqa: PLC0415

    me = threading.get_ident()
    names = {}
    while True:
        t = time.monotonic()
        time.sleep(0.002)
        late = (time.monotonic() - t) * 1000
        if late > 4.0:
            names = {th.ident: th.name for th in threading.enumerate()} if len(names) != threading.active_count() else names
            note("late", f"{late:.1f}")
            for ident, frame in sys._current_frames().items():
                if ident != me:
                    where = " < ".join(f"{Path(f.filename).name}:{f.lineno}:{f.name}"
                                       for f in reversed(traceback.extract_stack(frame)[-4:]))
                    note("at", f"{names.get(ident, ident)}: {where}")


_gc_started = [0.0, 0.0]


def gc_note(phase: str, info: dict) -> None:
    if phase == "start":
        _gc_started[:] = [time.perf_counter(), time.thread_time()]
        return
    ms = (time.perf_counter() - _gc_started[0]) * 1000
    cpu = (time.thread_time() - _gc_started[1]) * 1000
    if info.get("generation") == 2 or ms > 5.0:
        import gc  # noqa: PLC0415

        note("gc", f"gen{info.get('generation')} {ms:.1f} ms, cpu {cpu:.1f} ms, {sum(gc.get_count())} young, collected {info.get('collected')}")
        if info.get("generation") == 2 and os.environ.get("WARDEN_BENCH_HEAP_CENSUS"):  # what a full collection walks
            from collections import Counter  # noqa: PLC0415

            objs = gc.get_objects(2)
            top = Counter(type(o).__name__ for o in objs).most_common(12)
            note("census", f"{len(objs)} in gen2, {gc.get_freeze_count()} frozen: " + ", ".join(f"{n} {c}" for n, c in top))


def install() -> None:
    from textual.drivers._writer_thread import WriterThread  # noqa: PLC0415 (a benchmark aid)
    from textual.screen import Screen

    from console import app as app_mod
    from console import follow
    from store.reading import feed, tally
    from store.storage import watch as wakeups
    from store.storage.commitprobe import CommitProbe

    real_wakeups, real_source = wakeups.Wakeups.wakeups, wakeups.Wakeups._notify_source

    async def traced_wakeups(self, **kwargs):  # each wake-up the feed yields, with its reason
        it = real_wakeups(self, **kwargs)
        try:
            async for reason in it:
                note("wake:" + reason)
                yield reason
        finally:
            await it.aclose()

    def traced_source(self):  # each file event or NOTIFY
        source = real_source(self)
        if source is None:
            return None

        async def events():
            async for what in source:
                note("wake:file" if self.backend == "sqlite" else "wake:notify", what if isinstance(what, str) else "")
                yield what

        return events()

    real_moved = CommitProbe.moved

    def moved(self) -> bool:  # each check of the commit probe
        got = real_moved(self)
        note("wake:check_moved" if got else "wake:check")
        return got

    wakeups.Wakeups.wakeups = traced_wakeups
    wakeups.Wakeups._notify_source = traced_source
    CommitProbe.moved = moved
    wrap(follow.LedgerFollower, "read_step", "read")
    wrap(feed.Feed, "since", "since")
    wrap(tally.TaskTally, "apply", "tally")
    from console import messages  # noqa: PLC0415

    real_changed = messages.LedgerChanged.__init__

    def posted(self, *args, **kwargs) -> None:  # the follower has a delta for the app (its thread)
        note("changed")
        real_changed(self, *args, **kwargs)

    messages.LedgerChanged.__init__ = posted  # (ledger_changed is an @on handler: wrapping it does nothing)
    wrap(app_mod.WardenApp, "apply_pending", "apply")
    from console import model as model_mod  # noqa: PLC0415
    from console.screens import graph as graph_mod  # noqa: PLC0415

    real_pages = graph_mod.graph_pages

    def pages(*args, **kwargs):  # a graph's pages as the loading thread reads them
        it = iter(real_pages(*args, **kwargs))
        while True:
            note("page-read>")
            cpu = time.thread_time()
            try:
                page = next(it)
            except StopIteration:
                note("page-read<", "end")
                return
            note("page-read<", f"{len(page.nodes)} rows cpu {1000 * (time.thread_time() - cpu):.1f} ms")
            yield page

    graph_mod.graph_pages = pages
    from console import messages as messages_mod  # noqa: PLC0415
    real_page_init = messages_mod.GraphPageReady.__init__

    def page_init(self, task_id, page, ack=None, **kwargs):  # the UI's go-ahead for the next page
        if ack is not None:
            real_set = ack.set

            def traced_set() -> None:
                note("page-ack")
                real_set()

            ack.set = traced_set  # type: ignore[method-assign]
        real_page_init(self, task_id, page, ack, **kwargs)

    messages_mod.GraphPageReady.__init__ = page_init
    wrap(model_mod.GraphModel, "start", "page-start")
    wrap(model_mod.GraphModel, "extend", "page-extend")
    wrap(app_mod.WardenApp, "_tick", "tick")
    real_start = app_mod.WardenApp.start_analysis

    def start(self, req, task_ids, parts, kind, must_eta=None) -> None:
        note("analyse>", f"{kind} {len(task_ids)}")
        real_start(self, req, task_ids, parts, kind, must_eta)

    app_mod.WardenApp.start_analysis = start
    wrap(app_mod.WardenApp, "_analysed", "analysed", lambda self, req, result: f"{result.kind} took {result.took_s:.3f}")
    wrap(Screen, "_compositor_refresh", "frame")

    real_write = WriterThread.write

    def write(self, text: str) -> None:
        note("out", len(text))
        real_write(self, text)

    WriterThread.write = write

    real_on_event = app_mod.WardenApp.on_event

    async def on_event(self, event) -> None:
        if type(event).__name__ == "Key":
            note("key", getattr(event, "key", ""))
        await real_on_event(self, event)

    app_mod.WardenApp.on_event = on_event
    import gc  # noqa: PLC0415

    gc.callbacks.append(gc_note)
    heap = os.environ.get("WARDEN_BENCH_HEAP", "")
    if heap:  # the collector otherwise (a measurement, not the product): "none" no freeze; "threshold:A,B,C" and no freeze
        app_mod.settle_heap = lambda: None
        if heap.startswith("threshold:"):
            gc.set_threshold(*(int(x) for x in heap.split(":", 1)[1].split(",")))
    threading.Thread(target=flush_every_second, daemon=True, name="trace-flush").start()
    if os.environ.get("WARDEN_BENCH_GIL_PROBE"):
        threading.Thread(target=gil_probe, daemon=True, name="gil-probe").start()


if __name__ == "__main__":
    install()
    from console.cli import main

    code = main(sys.argv[1:])
    _out.flush()
    sys.exit(code)
