"""Data and compute: BI and spreadsheet agents, simulations with checkpoints, LLM eval harnesses,
media transcoding and transcription, notebooks, downloads and paginated APIs."""

from __future__ import annotations

import random

from ..stalls import Script
from .base import T2, healthy, loop_reports, looping, prefix, warmup

REGIONS = ("EMEA", "NA", "LATAM", "APAC", "DACH", "Nordics", "Benelux", "Iberia", "ANZ", "Japan")
METRICS = ("revenue", "gross margin", "churned accounts", "active seats", "refund volume", "ARPU", "new logos")


# ---------------------------------------------------------------------------------------------- healthy
@healthy
def bi_pivot_report(rng: random.Random, actions: bool) -> Script:
    """A BI agent queries a warehouse slice by slice and fills a quarterly report's tabs."""
    t = T2(rng)
    q = t.choose("Q1", "Q2", "Q3", "Q4")
    year = t.rng.randint(2019, 2026)
    engine = t.choose("bq", "snowsql", "duckdb", "psql")
    for reg in t.rng.sample(REGIONS, t.rng.randint(5, 9)):
        metric = t.rng.choice(METRICS)
        rows = [(f"{year}-{m:02d}", t.rng.uniform(1e3, 9e6)) for m in range(1, 4)]
        table = "\n".join(f"| {month} | {reg} | {t.num(v, 2)} |" for month, v in rows)
        t.emit(f"{engine} -q \"select month, region, sum({metric.replace(' ', '_')}) from facts where region='{reg}' and quarter='{q}' group by 1,2\"",
               f"+---------+--------+------------+\n{table}\n+---------+--------+------------+\n{len(rows)} rows in set ({t.took(t.rng.uniform(0.2, 12))})",
               tool=engine)
        cell = f"{t.choose('B', 'C', 'D', 'E')}{t.rng.randint(2, 60)}"
        t.emit(f"sheets.update(range='{reg}!{cell}:{cell[0]}{int(cell[1:]) + 2}')",
               f'{{"spreadsheetId": "{t.hexid(20)}", "updatedRange": "{reg}!{cell}", "updatedCells": 3}}', tool="sheets",
               note=t.say(f"{reg}: {metric} is {t.num(sum(v for _, v in rows), 0)} for {q}.", ""))
    t.emit(None, f"Report for {q} {year} ready: {t.rng.randint(5, 9)} tabs, charts refreshed.")
    return t.script(actions)


@healthy
def spreadsheet_cleanup(rng: random.Random, actions: bool) -> Script:
    """Cleaning an exported spreadsheet column by column: each fix touches other cells, counts fall."""
    t = T2(rng)
    cols = t.rng.sample(("Date", "Amount", "Currency", "Customer", "Country", "VAT id", "Email", "Phone", "SKU", "Qty"), t.rng.randint(6, 10))
    sheet = t.choose("export.xlsx", "Kunden_2024.xlsx", "ventes-T3.ods", "ledger.csv")
    bad = t.rng.randint(400, 9000)
    t.emit(f"python -m sheetcheck {sheet}", f"{t.num(bad)} problem cells in {len(cols)} columns", tool="python")
    for c in cols:
        fixed = t.rng.randint(20, max(30, bad // 3))
        bad = max(0, bad - fixed)
        what = t.choose("normalised dates to ISO 8601", "converted decimal commas", "trimmed whitespace", "split name into first/last",
                        "mapped country names to ISO codes", "deduplicated by e-mail", "coerced text numbers")
        t.emit(f"python -m sheetfix {sheet} --column '{c}'",
               f"{c}: {what}; {t.num(fixed)} cells changed (rows {t.num(t.rng.randint(2, 500))}–{t.num(t.rng.randint(600, 90000))}); "
               f"{t.num(bad)} problem cells remain", tool="python")
    t.emit(f"python -m sheetcheck {sheet}", f"{t.num(bad)} problem cells; saved {t.tmp('clean', '.xlsx')}", tool="python")
    return t.script(actions)


@healthy
def sim_checkpoints(rng: random.Random, actions: bool) -> Script:
    """A molecular-dynamics / CFD run: timesteps toward a total, energies drifting, checkpoints written."""
    t = T2(rng)
    code = t.choose("gromacs", "lammps", "openfoam", "mitgcm")
    total = t.rng.choice((500_000, 1_000_000, 2_500_000, 10_000_000))
    step, e = 0, t.rng.uniform(-9e5, -1e5)
    chunk = total // t.rng.randint(14, 30)
    while step < total:
        if t.rng.random() < 0.3:
            t.keeper(t.long(0.02, 0.3))
        step = min(total, step + chunk)
        e += t.rng.gauss(0, abs(e) * 0.001)
        line = t.choose(f"Step {t.num(step)}  Time {t.num(step * 0.002, 1)} ps  Potential {t.num(e, 3)}  T {t.num(t.rng.gauss(300, 2), 2)} K",
                        f"{step:>10d} {e:14.4f} {t.rng.gauss(300, 2):8.3f} {t.rng.uniform(0.9, 1.1):8.5f}",
                        f"Time = {step * 1e-4:.4f}\nCourant Number mean: {t.rng.uniform(0.1, 0.5):.5f} max: {t.rng.uniform(0.6, 0.99):.5f}\n"
                        f"ExecutionTime = {t.num(t.rng.uniform(10, 9999), 2)} s")
        ck = ""
        if t.rng.random() < 0.35:
            ck = f"\nWriting checkpoint to {t.choose('state', 'restart')}.{step}.cpt ({t.num(t.rng.uniform(80, 4000), 1)} MB) at {t.stamp()}"
        t.emit(f"tail -n 3 {code}.log", line + ck, tool="tail", units=(step, total))
    t.emit(None, f"{code} run finished: {t.num(total)} steps; final energy {t.num(e, 2)}.")
    return t.script(actions)


@healthy
def llm_eval_harness(rng: random.Random, actions: bool) -> Script:
    """An eval harness walks benchmark subsets; every subset has its own samples and score."""
    t = T2(rng)
    model = t.choose("llama-3.1-8b-instruct", "mistral-7b-v0.3", "qwen2.5-14b", "gemma-2-9b", "ckpt-step-48000")
    tasks = t.rng.sample(("mmlu_abstract_algebra", "mmlu_anatomy", "mmlu_astronomy", "hellaswag", "arc_challenge", "gsm8k",
                          "truthfulqa_mc2", "winogrande", "mmlu_college_physics", "boolq", "piqa", "humaneval"), t.rng.randint(6, 11))
    for i, task in enumerate(tasks):
        n = t.rng.randint(100, 1500)
        acc = t.rng.uniform(0.25, 0.9)
        if n > 900:
            t.keeper(t.long(0.1, 0.35))
        t.emit(f"lm_eval --model hf --model_args pretrained={model} --tasks {task} --batch_size auto",
               f"Running loglikelihood requests: 100%|██████████| {n}/{n} [{t.took(t.rng.uniform(20, 900))}]\n"
               f"|{task}| 1|none| 0|acc |↑ |{acc:.4f}|± |{t.rng.uniform(0.005, 0.03):.4f}|", tool="lm_eval", units=(i + 1, len(tasks)))
    t.emit(None, f"{model}: {len(tasks)} tasks scored; results in {t.tmp('results', '.json')}")
    return t.script(actions)


@healthy
def transcode_ladder(rng: random.Random, actions: bool) -> Script:
    """ffmpeg encodes a bitrate ladder rendition by rendition; its progress lines move on."""
    t = T2(rng)
    src = t.choose("keynote_master.mov", "ep07_final.mxf", "launch-video.mp4", "lecture-12.mkv")
    frames = t.rng.randint(20_000, 200_000)
    for h, br in t.rng.sample([(2160, 16000), (1440, 9000), (1080, 5000), (720, 2800), (480, 1400), (360, 800), (240, 400)], t.rng.randint(3, 6)):
        out = f"{src.rsplit('.', 1)[0]}_{h}p.mp4"
        for part in range(t.rng.randint(2, 5)):
            f = min(frames, int(frames * (part + 1) / 4))
            t.emit(f"ffmpeg -i {src} -vf scale=-2:{h} -c:v libx264 -b:v {br}k {out}",
                   f"frame={f:6d} fps={t.rng.uniform(20, 240):5.1f} q={t.rng.uniform(18, 30):.1f} size={t.num(f * br / 200)}kB "
                   f"time={t.took(f / 25)} bitrate={br * t.rng.uniform(0.9, 1.1):.1f}kbits/s speed={t.rng.uniform(0.5, 9):.2f}x",
                   tool="ffmpeg", units=(f, frames))
        t.emit(f"ffprobe -v error -show_entries format=duration,bit_rate {out}",
               f"[FORMAT]\nduration={frames / 25:.6f}\nbit_rate={br * 1000 + t.rng.randint(-9999, 9999)}\n[/FORMAT]", tool="ffprobe")
    return t.script(actions)


@healthy
def audio_transcription(rng: random.Random, actions: bool) -> Script:
    """Transcribing a long recording chunk by chunk; each chunk's segments say other things."""
    t = T2(rng)
    words = ("budget", "roadmap", "hiring", "the migration", "customer churn", "Q3 targets", "the outage", "pricing",
             "onboarding", "security review", "the vendor contract", "latency", "the launch date", "headcount")
    speakers = ("SPEAKER_00", "SPEAKER_01", "SPEAKER_02")
    start = 0.0
    chunks = t.rng.randint(10, 25)
    for c in range(chunks):
        segs = []
        for _ in range(t.rng.randint(2, 5)):
            d = t.rng.uniform(2, 20)
            segs.append(f"[{start:8.2f} --> {start + d:8.2f}] {t.rng.choice(speakers)}: "
                        f"{t.choose('So about', 'I think', 'Can we move', 'Regarding', 'Last week we saw')} {t.rng.choice(words)} "
                        f"{t.choose('we should wait', 'is on track', 'needs an owner', 'slipped by two weeks', 'is the priority')} "
                        f"{t.rng.randint(2, 99)}")
            start += d
        t.emit(f"whisperx chunk_{c:03d}.wav --diarize --model large-v3", "\n".join(segs), tool="whisperx", units=(c + 1, chunks))
    return t.script(actions)


@healthy
def notebook_analysis(rng: random.Random, actions: bool) -> Script:
    """A data scientist's notebook run cell by cell: each cell prints another frame, model or plot."""
    t = T2(rng)
    cells = [
        lambda: (f"df = pd.read_parquet('{t.choose('s3://lake/events', 'data/sales')}.parquet'); df.shape", f"({t.num(t.rng.randint(10**4, 10**7))}, {t.rng.randint(8, 60)})"),
        lambda: ("df.isna().mean().sort_values().tail(3)", "\n".join(f"{c:<14}{t.rng.random():.4f}" for c in t.rng.sample(("coupon", "referrer", "region", "age", "plan"), 3))),
        lambda: ("df.groupby('plan')['mrr'].describe()", "\n".join(f"{p:<9}{t.num(t.rng.uniform(10, 900), 2)}  {t.num(t.rng.uniform(1, 90), 2)}" for p in ("free", "pro", "team", "enterprise"))),
        lambda: (f"model = LogisticRegression(C={t.rng.choice((0.1, 1, 10))}).fit(X_train, y_train); model.score(X_test, y_test)", f"{t.rng.uniform(0.6, 0.95):.4f}"),
        lambda: (f"fig.savefig('fig_{t.slug(4)}.png')", f"<Figure size 1200x800 with {t.rng.randint(1, 4)} Axes>"),
        lambda: (f"corr = df[{t.rng.sample(['age', 'tenure', 'mrr', 'seats', 'tickets'], 3)}].corr(); corr.round(3)",
                 "\n".join(" ".join(f"{t.rng.uniform(-1, 1):6.3f}" for _ in range(3)) for _ in range(3))),
        lambda: (f"shap_values = explainer(X_test[:{t.rng.randint(100, 2000)}])", f"100%|██████████| {t.rng.randint(100, 2000)}/{t.rng.randint(100, 2000)} [{t.took(t.rng.uniform(5, 300))}]"),
    ]
    n = t.rng.randint(12, 24)
    for i in range(n):
        src, out = t.rng.choice(cells)()
        t.emit(f"jupyter execute cell [{i + 1}]: {src}", f"Out[{i + 1}]: {out}", tool="jupyter")
    return t.script(actions)


# ---------------------------------------------------------------------------------------------- loops
@looping
def sim_diverges_restart(rng: random.Random, actions: bool) -> Script:
    """Restarts from the same checkpoint, diverges at the same step; only run ids and stamps change."""
    t = T2(rng)
    ck = t.rng.randint(10, 90) * 10_000
    pre = prefix(t)
    for i in range(pre):
        t.emit("tail -n 1 md.log", f"Step {t.num(ck - (pre - i) * 1000)}  Potential {t.num(t.rng.uniform(-9e5, -1e5), 3)}", tool="tail")
    bad = ck + t.rng.randint(100, 5000)
    atom = t.rng.randint(1, 90000)
    t.loop()
    for _ in range(loop_reports(t)):
        dt_ = t.choose("0.002", "0.002", "0.0020")
        t.emit(f"gmx mdrun -deffnm md -cpi state.{ck}.cpt -nb gpu -dt {dt_}",
               f"run {t.rid()} started {t.stamp()}\nReading checkpoint file state.{ck}.cpt\n"
               f"Step {t.num(bad)}: The total potential energy is nan, which is not finite.\n"
               f"Atom {atom} moved more than the cut-off; LINCS WARNING relative constraint deviation {t.rng.uniform(1e3, 1e6):.1f}\n"
               f"Fatal error: simulation unstable. (wall time {t.took(t.rng.uniform(30, 600))})", tool="gmx",
               note=t.say("Restarting from the last checkpoint.", "Retry from checkpoint.", "", "One more restart; might be transient."))
    return t.script(actions)


@looping
def eval_cuda_oom_rerun(rng: random.Random, actions: bool) -> Script:
    """An eval rerun as is after a CUDA OOM at the same batch; the allocator's figures wobble."""
    t = T2(rng)
    task = t.choose("gsm8k", "humaneval", "mmlu_pro", "bbh")
    for i in range(prefix(t)):
        t.emit(f"lm_eval --tasks {t.choose('arc_easy', 'piqa', 'boolq', 'sciq')} --batch_size 32",
               f"|task{i}| acc | {t.rng.uniform(0.4, 0.9):.4f} |", tool="lm_eval")
    t.loop()
    gpu = t.rng.randint(0, 7)
    for _ in range(loop_reports(t)):
        t.emit(f"lm_eval --tasks {task} --batch_size 32 --device cuda:{gpu}",
               f"Running generate_until requests:  {t.rng.randint(0, 3)}%|          | {t.rng.randint(0, 40)}/{t.rng.randint(1000, 1400)}\n"
               f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {t.num(t.rng.choice((2.0, 2.0, 1.95)), 2)} GiB. "
               f"GPU {gpu} has a total capacity of 79.15 GiB of which {t.num(t.rng.uniform(0.2, 1.9), 2)} GiB is free. "
               f"Process {t.rng.randint(1000, 99999)} has {t.num(t.rng.uniform(77, 79), 2)} GiB memory in use.", tool="lm_eval",
               note=t.say("Rerunning the eval.", "Trying again — might have been another job on the GPU.", "", "Retry."))
    return t.script(actions)


@looping
def transcode_moov_missing(rng: random.Random, actions: bool) -> Script:
    """ffmpeg on a truncated upload, rerun with flags shuffled and new output temp names: "moov atom not found"."""
    t = T2(rng)
    src = f"uploads/{t.hexid(16)}.mp4"
    warmup(t, [
        ("ffprobe", f"ffprobe -hide_banner {name}.mp4", f"Duration: 00:{t.rng.randint(1, 59):02d}:{t.rng.randint(0, 59):02d}.{t.rng.randint(10, 99)}, bitrate: {t.rng.randint(900, 9000)} kb/s")
        for name in t.rng.sample(("intro", "teaser", "ep01", "ep02", "outro", "trailer", "bumper", "recap", "promo"), 8)
    ] + [("ls", "ls -la uploads/ | tail -3", f"-rw-r--r-- 1 app app {t.num(t.rng.randint(10**6, 10**9))} {src.split('/')[-1]}")])
    t.loop()
    for _ in range(loop_reports(t)):
        flags = t.rng.sample(("-y", "-hide_banner", "-err_detect ignore_err", "-fflags +genpts", "-c:v libx264", "-preset fast"), 3)
        out = t.tmp("out", ".mp4")
        t.emit(f"ffmpeg {' '.join(flags)} -i {src} {out}",
               f"ffmpeg version 6.{t.rng.randint(0, 1)} Copyright (c) 2000-2024\n[mov,mp4,m4a,3gp,3g2,mj2 @ 0x{t.hexid(12)}] moov atom not found\n"
               f"{src}: Invalid data found when processing input", tool="ffmpeg")
    return t.script(actions)


@looping
def spreadsheet_ref_error(rng: random.Random, actions: bool) -> Script:
    """A sheets agent rewrites the same broken formula in new forms; recalculation shows #REF! in the same cells."""
    t = T2(rng)
    tab = t.choose("Summary", "Pivot", "Dashboard", "Übersicht")
    warmup(t, [("sheets", f"sheets.get(range='{sheet}!A1:F{t.rng.randint(10, 400)}')",
                f"{t.rng.randint(10, 400)} rows, {t.rng.randint(4, 9)} columns; {t.choose('totals', 'sum of column C', 'row 2 reads')} {t.num(t.rng.uniform(1e4, 1e7), 2)}")
               for sheet in t.rng.sample(("Data", "Q1", "Q2", "Q3", "Q4", "Targets", "FX", "Regions", "Mapping"), 8)])
    cells = sorted(t.rng.sample([f"{c}{r}" for c in "DEF" for r in range(2, 30)], t.rng.randint(3, 8)))
    t.loop()
    for _ in range(loop_reports(t)):
        formula = t.choose("=VLOOKUP(A2,Data!A:F,7,FALSE)", "=INDEX(Data!G:G,MATCH(A2,Data!A:A,0))", "=XLOOKUP(A2,Data!A:A,Data!G:G)",
                           "=IFERROR(VLOOKUP($A2,Data!$A:$F,7,0),\"\")", "=SUMIF(Data!A:A,A2,Data!G:G)")
        t.emit(f"sheets.update(range='{tab}!D2', values=[['{formula}']])",
               f'{{"updatedCells": 1, "revision": "{t.hexid(10)}"}}\nRecalculated: #REF! in {", ".join(cells)} '
               f"(Data!G is outside the sheet's 6 columns)", tool="sheets",
               note=t.say("Let me fix the lookup.", "Another way to write the formula.", "Trying a different function.", ""))
    return t.script(actions)


@looping
def empty_page_new_cursor(rng: random.Random, actions: bool) -> Script:
    """A paginated API returns an empty page with a fresh cursor every time; the agent keeps following it."""
    t = T2(rng)
    api = t.choose("https://api.hubapi.com/crm/v3/objects/contacts", "https://api.notion.com/v1/search",
                   "https://slack.com/api/conversations.history", "https://api.zendesk.com/api/v2/tickets")
    for _ in range(prefix(t)):
        n = t.rng.randint(20, 100)
        t.emit(f"GET {api}?limit=100&after={t.rid()}", f'{{"results": [{n} items: {t.rid()} … {t.rid()}], "next": "{t.rid()}"}}', tool="http")
    t.loop()
    for _ in range(loop_reports(t)):
        cur = t.rid()
        t.emit(f"GET {api}?limit=100&after={t.rid()}",
               t.choose(f'{{"results": [], "paging": {{"next": {{"after": "{cur}"}}}}}}',
                        f'{{"ok": true, "messages": [], "has_more": true, "response_metadata": {{"next_cursor": "{cur}"}}}}',
                        f'{{"object": "list", "results": [], "next_cursor": "{cur}", "has_more": true}}'),
               tool="http", note=t.say("Next page.", "Following the cursor.", "", "More pages to go."))
    return t.script(actions)


@looping
def redownload_temp_names(rng: random.Random, actions: bool) -> Script:
    """Downloads the same archive again under a new temp name; its checksum never matches."""
    t = T2(rng)
    name = t.choose("model-weights.safetensors", "dataset-v3.tar.zst", "ne_10m_admin.zip", "openjdk-21_linux-x64.tar.gz")
    want, got = t.hexid(64), t.hexid(64)
    size = t.rng.randint(10**7, 5 * 10**9)
    warmup(t, [
        ("df", "df -h /data", f"Filesystem Size Used Avail Use%\n/dev/nvme1n1 1.8T {t.rng.randint(100, 900)}G {t.rng.randint(500, 1500)}G {t.rng.randint(10, 60)}%"),
        ("curl", f"curl -sI https://mirror.example.net/pub/{name}", f"HTTP/2 200\ncontent-length: {size}\nlast-modified: {t.stamp()}"),
        ("curl", f"curl -s https://mirror.example.net/pub/{name}.sha256", f"{want}  {name}"),
        ("cat", "cat fetch_assets.sh", f"#!/bin/sh\nset -e\ncurl -L -o \"$TMP/{name}\" \"$MIRROR/{name}\"\nsha256sum -c {name}.sha256"),
        ("ls", "ls /data/assets", f"{t.choose('tokenizer.json', 'labels.csv', 'README')}\n{t.choose('config.yaml', 'LICENSE', 'index.html')}"),
        ("git", "git log -1 --format=%s -- fetch_assets.sh", "fetch: verify checksums"),
        ("nproc", "nproc && free -g | head -2", f"{t.rng.choice((8, 16, 32, 64))}\n              total        used\nMem:           {t.rng.choice((62, 125, 251))}         {t.rng.randint(3, 40)}"),
        ("ping", "ping -c 2 mirror.example.net", f"2 packets transmitted, 2 received, 0% packet loss, time {t.rng.randint(1000, 1200)}ms"),
    ])
    t.loop()
    for _ in range(loop_reports(t)):
        dest = t.tmp(name.split(".")[0], ".download")
        t.emit(f"curl -L -o {dest} https://mirror.example.net/pub/{name}",
               f"  % Total    % Received\n100 {t.num(size / 1e6, 1)}M  100 {t.num(size / 1e6, 1)}M   {t.num(t.rng.uniform(5, 120), 1)}M/s   {t.took(t.rng.uniform(5, 200))}\n"
               f"sha256 mismatch for {dest}: expected {want}, got {got}", tool="curl",
               note=t.say("Corrupt download; fetching it again.", "Redownloading.", "", "Checksum failed, once more."))
    return t.script(actions)
