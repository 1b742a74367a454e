"""Data jobs: migrations, ETL batches, backfills, crawls, reindexing, training runs."""

from __future__ import annotations

import random

from ..stalls import Script
from . import noise
from .trace import Trial, healthy, looping, pick
from .words import CITIES, NOUNS, PEOPLE, PROJECTS


def _setup(rng: random.Random) -> Trial:
    return Trial(rng)


@healthy
def migration_ranges(rng: random.Random, actions: bool) -> Script:
    """A row migration in id ranges: ``migrated rows 120,000–130,000 of 1,000,000`` in the tool's own format."""
    t = _setup(rng)
    size = rng.choice((1_000, 5_000, 10_000, 25_000, 50_000, 100_000))
    total = size * rng.randint(40, 400) + rng.choice((0, 0, rng.randint(1, size - 1)))
    table = f"{rng.choice(NOUNS)}s"
    span_style, units = rng.randrange(6), rng.random() < 0.5
    cmd = pick(rng, f"python manage.py migrate_{table} --resume", f"./bin/backfill --table {table}", f"rake data:migrate[{table}]")
    a = rng.randrange(0, total // 3, size)
    fm, fe = rng.randrange(3), rng.randrange(4)
    for _ in range(rng.randint(15, 35)):
        if a >= total:
            break
        b = min(total, a + size)
        secs = rng.uniform(1.5, 30)
        msg = (f"migrated rows {noise.span(a, b, total, span_style, t.num_style)}",
               f"{table}: copied {noise.span(a, b, total, span_style, t.num_style)}",
               f"batch done: {noise.span(a, b, total, span_style, t.num_style)}")[fm]
        extra = (f" in {t.dur(secs)} ({t.n(size / secs)} rows/s)", f" [{noise.pct(100 * b / total, t.num_style)}]",
                 f" eta {t.dur((total - b) / size * secs)}", "")[fe]
        t.emit(cmd, f"{t.ts()} {msg}{extra}", units=(b, total) if units else None)
        a = b
        if rng.random() < 0.1:
            t.advance(t.long(0.1, 0.3))
            t.emit(f"psql -c 'VACUUM ANALYZE {table}'", f"VACUUM\n{t.ts()} vacuum of {table} done in {t.dur(rng.uniform(5, 60))}")
    return t.script(actions)


@healthy
def etl_batches(rng: random.Random, actions: bool) -> Script:
    """Load batch after batch into a warehouse table; each batch has its own rejects."""
    t = _setup(rng)
    n = rng.randint(20, 400)
    table = f"staging.{rng.choice(NOUNS)}_{rng.choice(('raw', 'events', 'facts', 'daily'))}"
    start = rng.randint(1, max(1, n - 30))
    fm = rng.randrange(3)
    for i in range(start, min(n, start + rng.randint(14, 30)) + 1):
        rows = rng.randint(800, 50_000)
        rej = rng.choice((0, 0, 0, rng.randint(1, 40)))
        why = pick(rng, "invalid date", "null customer_id", "bad currency code", "negative amount") if rej else ""
        out = (f"batch {i}/{n}: loaded {t.n(rows)} records into {table}",
               f"[{t.ts()}] {table} <- batch_{i:04d}.jsonl.gz ({t.n(rows)} rows)",
               f"Batch {i} of {n} committed: {t.n(rows)} inserted")[fm]
        if rej:
            out += f", {rej} rejected ({why}; see rejects/batch_{i:04d}.csv)"
        crash = rng.random() < 0.04  # the worker dies on a dropped connection; the retry resumes at the next batch
        if crash:
            out += f"\n{t.ts()} psycopg.OperationalError: server closed the connection unexpectedly"
        t.emit(f"etl load --batch {i}", out, units=(i, n), fail_after=crash)
    return t.script(actions)


@healthy
def backfill_partitions(rng: random.Random, actions: bool) -> Script:
    """Backfill a day partition at a time; every day writes its own files."""
    t = _setup(rng)
    day = t.now - rng.randint(100, 900) * 86400
    bucket = f"s3://{rng.choice(PROJECTS)}-{rng.choice(('lake', 'events', 'warehouse'))}"
    days = rng.randint(12, 30)
    for i in range(days):
        d = noise.stamp(day + i * 86400, 0)[:10]
        ev = rng.randint(10_000, 2_000_000)
        parts = rng.randint(1, 16)
        t.emit(f"spark-submit backfill.py --date {d}",
               f"{d}: {t.n(ev)} events -> {bucket}/events/dt={d}/ ({parts} part files, {noise.size(ev * rng.randint(80, 300), t.num_style)})\n"
               f"application_{int(t.now)}_{rng.randint(1, 9999):04d} finished with state SUCCEEDED",
               units=(i + 1, days))
        if rng.random() < 0.15:
            t.advance(t.long(0.1, 0.35))
    return t.script(actions)


@healthy
def crawler_pages(rng: random.Random, actions: bool) -> Script:
    """A crawler fetching pages of a site it has not seen; the frontier grows and shrinks."""
    t = _setup(rng)
    host = t.names.host()
    queue = rng.randint(50, 3000)
    fm = rng.randrange(2)
    for _ in range(rng.randint(20, 40)):
        code = rng.choice((200,) * 12 + (301, 404, 429))
        url = f"https://{host}/{t.names.slug()}"
        links = rng.randint(0, 80) if code == 200 else 0
        queue = max(0, queue + links - rng.randint(1, 10))
        out = (f"[{code}] {url} {noise.size(rng.randint(2_000, 400_000), t.num_style)}, {links} links (queue {t.n(queue)})",
               f"{t.ts()} GET {url} -> {code} in {t.dur(rng.uniform(0.05, 3))}; +{links} urls; frontier={t.n(queue)}")[fm]
        if code == 200 and rng.random() < 0.5:
            out += f"\n  title: {rng.choice(NOUNS).title()} {pick(rng, 'guide', 'pricing', 'blog', 'docs', 'careers')} — {host}"
        t.emit(f"fetch {url}", out, tool="crawler")
    return t.script(actions)


@healthy
def reindex_task_poll(rng: random.Random, actions: bool) -> Script:
    """Poll an Elasticsearch reindex task until done; its counters move on every poll."""
    t = _setup(rng)
    total = rng.randint(500_000, 40_000_000)
    done = rng.randint(0, total // 4)
    node = noise.b62(rng, 22)
    task = f"{node}:{rng.randint(1000, 99_999_999)}"
    while done < total and len(t.beats) < 40:
        done = min(total, done + int(total * rng.uniform(0.01, 0.06)))
        out = (f'{{"completed": {str(done == total).lower()}, "task": {{"node": "{node}", "id": {task.split(":")[1]}, '
               f'"status": {{"total": {total}, "updated": 0, "created": {done}, "deleted": 0, "batches": {done // 1000 + 1}, '
               f'"version_conflicts": 0, "noops": 0}}, "running_time_in_nanos": {int(t.now * 1e3) % 10**13}}}}}')
        t.emit(f"GET _tasks/{task}", out, tool="http")
    return t.script(actions)


@healthy
def file_conversion(rng: random.Random, actions: bool) -> Script:
    """Convert a directory of CSV exports to Parquet, file by file."""
    t = _setup(rng)
    files = [f"exports/{rng.choice(NOUNS)}_{noise.stamp(t.now - rng.randint(1, 900) * 86400, 0)[:10]}_{rng.randint(1, 99):02d}.csv"
             for _ in range(rng.randint(12, 30))]
    files = sorted(set(files))
    for i, f in enumerate(files):
        rows = rng.randint(1_000, 5_000_000)
        t.emit(f"python to_parquet.py {f}", f"{f} -> {f[:-4]}.parquet: {t.n(rows)} rows, "
               f"{noise.size(rows * rng.randint(40, 200), t.num_style)} -> {noise.size(rows * rng.randint(8, 40), t.num_style)} "
               f"({t.dur(rng.uniform(0.5, 40))})", units=(i + 1, len(files)))
    return t.script(actions)


@healthy
def model_training(rng: random.Random, actions: bool) -> Script:
    """A training run's log: step counters toward a total, loss falling noisily, checkpoints, evals."""
    t = _setup(rng)
    total = rng.choice((10_000, 50_000, 100_000, 200_000))
    every = rng.choice((50, 100, 200, 500))
    step = rng.randrange(every, total // 3, every)
    loss = rng.uniform(1.5, 4.0)
    run = f"{rng.choice(PROJECTS)}-{noise.hexid(rng, 6)}"
    fm = rng.randrange(3)
    for _ in range(rng.randint(18, 36)):
        step += every
        loss = max(0.05, loss * rng.uniform(0.96, 1.01))
        line = (f"step {step}/{total} | loss {loss:.4f} | lr {rng.uniform(1e-5, 3e-4):.2e} | {rng.randint(900, 40000)} tok/s",
                f"{{'loss': {loss:.4f}, 'grad_norm': {rng.uniform(0.1, 3):.3f}, 'learning_rate': {rng.uniform(1e-5, 3e-4):.3e}, "
                f"'epoch': {step / total * 3:.2f}}}",
                f"[{t.ts()}] it {step:>7} loss={loss:.3f} ({t.dur(rng.uniform(0.1, 2))}/it)")[fm]
        if rng.random() < 0.12:
            line += f"\nSaving model checkpoint to runs/{run}/checkpoint-{step}"
        if rng.random() < 0.1:
            line += f"\n***** eval ***** eval_loss = {loss * rng.uniform(1.0, 1.2):.4f}  eval_accuracy = {rng.uniform(0.4, 0.95):.4f}"
        t.emit(f"tail -n 3 runs/{run}/train.log", line, units=(step, total))
    return t.script(actions)


@healthy
def entity_dedupe(rng: random.Random, actions: bool) -> Script:
    """Resolve duplicate customer records, cluster by cluster."""
    t = _setup(rng)
    n = rng.randint(12, 28)
    for i in range(n):
        who = t.names.person() if rng.random() < 0.3 else f"{rng.choice(PEOPLE).split()[0]} {rng.choice(NOUNS).title()}son"
        ids = [f"C{rng.randint(100000, 999999)}" for _ in range(rng.randint(2, 5))]
        out = pick(rng, f"cluster {i + 1}: merged {', '.join(ids)} -> {ids[0]} ({who}, {rng.choice(CITIES)}; score {rng.uniform(0.8, 1):.2f})",
                   f"{who}: {len(ids)} records ({', '.join(ids)}) — kept {ids[0]}, moved {rng.randint(1, 40)} orders")
        t.emit(f"dedupe --cluster {i + 1}", out, units=(i + 1, n))
    return t.script(actions)


@healthy
def hparam_sweep(rng: random.Random, actions: bool) -> Script:
    """A parameter sweep: one configuration per run, each with its own result."""
    t = _setup(rng)
    grid = [(lr, bs) for lr in (1e-4, 3e-4, 1e-3, 3e-3) for bs in (16, 32, 64, 128)]
    rng.shuffle(grid)
    grid = grid[: rng.randint(8, 16)]
    for i, (lr, bs) in enumerate(grid):
        t.advance(t.long(0.05, 0.3) if rng.random() < 0.3 else None)
        acc = rng.uniform(0.6, 0.93)
        t.emit(f"python train.py --lr {lr:g} --batch-size {bs} --epochs 3",
               f"run {noise.hexid(rng, 8)}: lr={lr:g} bs={bs} -> val_acc={acc:.4f} val_loss={rng.uniform(0.2, 1.2):.4f} "
               f"({t.dur(rng.uniform(30, 900))})", units=(i + 1, len(grid)))
    return t.script(actions)


@healthy
def bucket_sync(rng: random.Random, actions: bool) -> Script:
    """``aws s3 sync`` uploading a tree: each report names the files that went up."""
    t = _setup(rng)
    bucket = f"s3://{rng.choice(PROJECTS)}-{rng.choice(('backup', 'assets', 'exports'))}"
    total = rng.randint(200, 4000)
    left = total
    sent, whole = 0, total * rng.randint(1, 30) * 2**20
    while left > 0 and len(t.beats) < 36:
        k = min(left, rng.randint(3, 40))
        files = [f"data/{rng.choice(NOUNS)}/{noise.hexid(rng, 10)}.parquet" for _ in range(min(k, 4))]
        sent += k * rng.randint(1, 30) * 2**20
        left -= k
        out = "\n".join(f"upload: ./{f} to {bucket}/{f}" for f in files) + \
            f"\nCompleted {noise.size(min(sent, whole), 1)}/~{noise.size(whole, 1)} ({noise.size(rng.randint(2, 90) * 2**20, 1)}/s) with {left} file(s) remaining"
        t.emit(f"aws s3 sync ./data {bucket}/data", out)
    return t.script(actions)


# ---------------------------------------------------------------------- loops
def _prefix(t: Trial) -> None:
    rng = t.rng
    total = rng.randint(20, 400)
    i = rng.randint(1, 10)
    for _ in range(rng.randint(2, 7)):
        i += 1
        t.emit(f"etl load --batch {i}", f"batch {i}/{total}: loaded {t.n(rng.randint(800, 50_000))} records", units=(i, total))


@looping
def batch_same_error(rng: random.Random, actions: bool) -> Script:
    """A batch load retried after the same constraint violation; only transaction ids and stamps move."""
    t = _setup(rng)
    _prefix(t)
    table = f"{rng.choice(NOUNS)}s"
    key = rng.randint(1000, 9_999_999)
    cmd = pick(rng, "etl load --batch 42 --retry", "python load.py --resume", "dbt run --select " + table)
    t.loop()
    for _ in range(5 + rng.randint(3, 10)):
        out = (f"{t.ts()} ERROR:  duplicate key value violates unique constraint \"{table}_pkey\"\n"
               f"DETAIL:  Key (id)=({key}) already exists.\nCONTEXT:  COPY {table}, line {rng.choice((1, 1, 2))}\n"
               f"txid={rng.randint(10**6, 10**8)} run_id={noise.uuid(rng)}\nbatch rolled back")
        t.emit(cmd, out)
    return t.script(actions)


@looping
def pagination_trap(rng: random.Random, actions: bool) -> Script:
    """Page numbers rise, the site clamps them to its last page: the same items every time."""
    t = _setup(rng)
    host = t.names.host()
    items = [f"{rng.choice(NOUNS).title()} {rng.choice(('Kit', 'Pro', 'Mini', 'Set'))} — ${rng.randint(5, 400)}" for _ in range(rng.randint(3, 10))]
    p = 1
    for _ in range(rng.randint(3, 8)):
        t.emit(f"GET https://{host}/catalog?page={p}", "\n".join(
            f"{rng.choice(NOUNS).title()} {rng.choice(('Kit', 'Pro', 'Mini', 'Set'))} — ${rng.randint(5, 400)}" for _ in range(len(items))))
        p += 1
    t.loop()
    for _ in range(5 + rng.randint(3, 10)):
        t.emit(f"GET https://{host}/catalog?page={p}", f"{t.ts()} 200 ({noise.size(rng.randint(30_000, 31_000), 0)})\n" + "\n".join(items))
        p += 1
    return t.script(actions)


@looping
def migration_stuck_range(rng: random.Random, actions: bool) -> Script:
    """The migration retries the same id range after a deadlock, attempt after attempt."""
    t = _setup(rng)
    total, size = rng.choice((1_000_000, 2_400_000)), rng.choice((10_000, 50_000))
    a = rng.randrange(0, total // 2, size)
    style = rng.randrange(6)
    for _ in range(rng.randint(3, 8)):
        t.emit("./bin/migrate --resume", f"migrated rows {noise.span(a, a + size, total, style, t.num_style)}")
        a += size
    t.loop()
    for k in range(5 + rng.randint(3, 10)):
        t.emit("./bin/migrate --resume",
               f"{t.ts()} rows {noise.span(a, a + size, total, style, t.num_style)}: ERROR: deadlock detected\n"
               f"DETAIL: Process {rng.randint(1000, 60000)} waits for ShareLock on transaction {rng.randint(10**6, 10**8)}; "
               f"blocked by process {rng.randint(1000, 60000)}.\nretrying (attempt {k + 2})")
    return t.script(actions)


@looping
def reload_bad_file(rng: random.Random, actions: bool) -> Script:
    """Download the file again, load it again: the same column-count error each time."""
    t = _setup(rng)
    _prefix(t)
    src = f"https://{t.names.host()}/exports/{rng.choice(NOUNS)}_{rng.choice(CITIES).lower()}.csv"
    cols = rng.randint(8, 30)
    nbytes = rng.randint(10**6, 10**9)
    t.loop(2)
    for _ in range(-(-(5 + rng.randint(3, 10)) // 2)):
        tmp = noise.tmpdir(rng, rng.randrange(4)) + "/" + src.rsplit("/", 1)[-1]
        t.emit(f"curl -sSL -o {tmp} {src}", f"  % Total    % Received\n100 {noise.size(nbytes, 0)}  100 {noise.size(nbytes, 0)}    "
               f"{noise.size(rng.randint(10**6, 10**8), 0)}/s   {t.dur(rng.uniform(1, 60))}")
        t.emit(f"duckdb -c \"COPY t FROM '{tmp}'\"", f"Invalid Input Error: CSV Error on Line: 1\nExpected Number of Columns: {cols} "
               f"Found: {cols + 1}\nPossible fixes: set ignore_errors=true")
    return t.script(actions)

