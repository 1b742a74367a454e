"""Operations: SRE incident responders, Kubernetes and Terraform rollouts, SQL migrations, queues."""

from __future__ import annotations

import random

from ..stalls import Script
from .base import T2, healthy, loop_reports, looping, prefix, warmup

SERVICES = ("checkout", "payments", "search-api", "auth", "inventory", "notifications", "ledger-writer",
            "edge-proxy", "recs", "profile", "billing-worker", "media-upload", "gateway", "orders")
REGIONS = ("eu-west-1", "us-east-1", "ap-southeast-2", "us-west-2", "eu-central-1", "sa-east-1")


# ---------------------------------------------------------------------------------------------- healthy
@healthy
def sre_runbook_triage(rng: random.Random, actions: bool) -> Script:
    """An on-call agent works a page: metrics per service, recent deploys, traces, then a mitigation."""
    t = T2(rng)
    alert = t.choose("HighErrorRate", "LatencySLOBurn", "PodRestartsHigh", "5xxSpike", "QueueLagHigh")
    t.emit(f"pd incident ack {t.rng.randint(100000, 999999)}",
           f"Acknowledged incident #{t.rng.randint(1000, 99999)} ({alert}) at {t.stamp()}", tool="pd")
    svcs = t.rng.sample(SERVICES, t.rng.randint(6, 12))
    bad = t.rng.choice(svcs)
    for svc in svcs:
        q = t.choose(f'sum(rate(http_requests_total{{service="{svc}",code=~"5.."}}[5m]))',
                     f'histogram_quantile(0.99, sum by (le) (rate(http_request_duration_seconds_bucket{{service="{svc}"}}[5m])))',
                     f'rate(container_cpu_usage_seconds_total{{pod=~"{svc}-.*"}}[2m])')
        val = t.rng.uniform(0.001, 0.05) if svc != bad else t.rng.uniform(2.0, 40.0)
        series = "\n".join(f"{{pod=\"{svc}-{t.slug(9)}-{t.slug(5)}\"}} => {t.num(val * t.rng.uniform(0.5, 1.5), 4)} @{t.stamp()}"
                           for _ in range(t.rng.randint(1, 4)))
        t.emit(f"promtool query instant http://prometheus:9090 '{q}'", series, tool="promtool")
        if svc == bad or t.rng.random() < 0.25:
            t.emit(None, t.choose(f"{svc} stands out: {t.num(val, 2)} vs baseline {t.num(val / 20, 3)}.",
                                  f"Looked at {svc}: nothing unusual there.",
                                  f"Note: {svc} p99 is {t.took(val)} — {'way above' if svc == bad else 'within'} SLO."))
    revs = t.rng.randint(2, 5)
    hist = "\n".join(f"{i}\t{t.stamp()}\tsuperseded\t{bad}-{t.rng.randint(1, 9)}.{t.rng.randint(0, 40)}.{t.rng.randint(0, 9)}\tUpgrade complete"
                     for i in range(1, revs + 1))
    t.emit(f"helm history {bad} -n prod --max {revs}", "REVISION\tUPDATED\tSTATUS\tCHART\tDESCRIPTION\n" + hist, tool="helm")
    t.emit(f"helm rollback {bad} {revs - 1} -n prod", f"Rollback was a success! Happy Helming!\nrevision {revs + 1} deployed", tool="helm")
    for _ in range(t.rng.randint(3, 6)):
        val = t.rng.uniform(0.001, 0.05)
        t.emit(f"promtool query instant http://prometheus:9090 'sum(rate(http_requests_total{{service=\"{bad}\",code=~\"5..\"}}[5m]))'",
               f"{{service=\"{bad}\"}} => {t.num(val, 4)} @{t.stamp()}", tool="promtool",
               note=t.say("Error rate after the rollback:", "Watching recovery.", ""))
    t.emit(None, f"Mitigated by rolling {bad} back; postmortem doc {t.hexid(8)} opened, timeline written.")
    return t.script(actions)


@healthy
def canary_analysis(rng: random.Random, actions: bool) -> Script:
    """An Argo Rollouts canary promoted step by step, each analysis run with its own metric values."""
    t = T2(rng)
    app = t.rng.choice(SERVICES)
    img = f"registry.internal/{app}:{t.rng.randint(1, 4)}.{t.rng.randint(0, 30)}.{t.rng.randint(0, 12)}"
    t.emit(f"kubectl argo rollouts set image {app} {app}={img}", f'rollout "{app}" image updated', tool="kubectl")
    weights = t.rng.choice(((5, 10, 25, 50, 75, 100), (10, 20, 40, 60, 80, 100), (20, 50, 100), (1, 5, 10, 20, 50, 100)))
    for i, w in enumerate(weights):
        t.emit(f"kubectl argo rollouts get rollout {app}",
               f"Name: {app}\nStatus: ◌ Progressing\nStep: {2 * i + 1}/{2 * len(weights)}\nSetWeight: {w}\nActualWeight: {w}\n"
               f"Images: {img} (canary)\nReplicas: Desired {t.rng.randint(4, 12)} Current {t.rng.randint(4, 12)} Updated {max(1, w // 10)}",
               tool="kubectl")
        if t.rng.random() < 0.5:
            t.keeper(t.long(0.05, 0.3))
        sr = t.rng.uniform(99.2, 99.99)
        run = f"{app}-{t.hexid(10)}-{2 * i + 2}"
        t.emit(f"kubectl argo rollouts get analysisrun {run}",
               f"AnalysisRun {run}\n  success-rate: {t.pct(sr, 2)} (>= 99{'%'})  Successful\n"
               f"  p95-latency: {t.took(t.rng.uniform(0.08, 0.4))}  Successful\n  measurements: {t.rng.randint(3, 10)}",
               tool="kubectl", units=(i + 1, len(weights)))
    t.emit(f"kubectl argo rollouts status {app} --timeout 60s", "Healthy", tool="kubectl")
    return t.script(actions)


@healthy
def k8s_node_drain(rng: random.Random, actions: bool) -> Script:
    """Cordon and drain an old node pool node by node; each node evicts other pods."""
    t = T2(rng)
    pool = t.choose("gke-prod-pool-1", "ip-10-0", "aks-nodepool1", "worker")
    nodes = [f"{pool}-{t.hexid(8)}-{t.slug(4)}" for _ in range(t.rng.randint(4, 9))]
    t.emit("kubectl get nodes -l pool=old -o name", "\n".join(f"node/{n}" for n in nodes), tool="kubectl")
    for k, node in enumerate(nodes):
        t.emit(f"kubectl cordon {node}", f"node/{node} cordoned", tool="kubectl")
        pods = [f"{t.rng.choice(SERVICES)}-{t.slug(10)}-{t.slug(5)}" for _ in range(t.rng.randint(2, 7))]
        t.keeper(t.long(0.05, 0.35))
        out = "\n".join(f"evicting pod prod/{p}" for p in pods) + "\n" + "\n".join(f"pod/{p} evicted" for p in pods)
        t.emit(f"kubectl drain {node} --ignore-daemonsets --delete-emptydir-data --timeout=300s",
               out + f"\nnode/{node} drained", tool="kubectl", units=(k + 1, len(nodes)))
        if t.rng.random() < 0.5:
            t.emit("kubectl get pods -A --field-selector=status.phase!=Running -o wide",
                   "No resources found" if t.rng.random() < 0.6 else
                   f"prod  {pods[0][:-5]}{t.slug(5)}  0/1  ContainerCreating  0  {t.rng.randint(2, 40)}s  <none>  {t.rng.choice(nodes[k + 1:] or ['new-node'])}",
                   tool="kubectl")
    t.emit(None, f"Drained {len(nodes)} nodes; the old pool can be deleted.")
    return t.script(actions)


@healthy
def sql_migration_steps(rng: random.Random, actions: bool) -> Script:
    """Schema migrations applied one version at a time (flyway, alembic or sqitch), each its own DDL."""
    t = T2(rng)
    tables = t.rng.sample(("orders", "users", "invoices", "events", "sessions", "carts", "refunds", "audit_log",
                           "shipments", "coupons", "tenants", "api_keys"), t.rng.randint(5, 10))
    tool = t.choose("flyway", "alembic", "sqitch")
    t.emit(f"{tool} info" if tool != "alembic" else "alembic history --indicate-current",
           f"{len(tables)} pending migrations", tool=tool)
    for i, tb in enumerate(tables):
        col = t.choose("created_by", "tenant_id", "deleted_at", "currency", "region", "external_ref", "version")
        ddl = t.choose(f"ALTER TABLE {tb} ADD COLUMN {col} text", f"CREATE INDEX CONCURRENTLY ix_{tb}_{col} ON {tb} ({col})",
                       f"UPDATE {tb} SET {col} = 'EUR' WHERE {col} IS NULL")
        rows = t.rng.randint(0, 3_000_000)
        v = i + t.rng.randint(10, 90)
        if tool == "flyway":
            out = (f"Migrating schema \"public\" to version \"{v} - add {col} to {tb}\"\n{ddl}\n"
                   f"{t.num(rows)} rows affected\nSuccessfully applied 1 migration to schema \"public\", now at version v{v} (execution time {t.took(t.rng.uniform(0.1, 90))})")
            cmd = f"flyway migrate -target={v}"
        elif tool == "alembic":
            out = f"INFO  [alembic.runtime.migration] Running upgrade {t.hexid(12)} -> {t.hexid(12)}, add {col} to {tb}\n{ddl}"
            cmd = "alembic upgrade +1"
        else:
            out = f"Deploying changes to db:pg://prod\n  + {tb}_{col} .. ok ({t.num(rows)} rows)"
            cmd = f"sqitch deploy --to {tb}_{col}"
        if rows > 1_500_000:
            t.keeper(t.long(0.1, 0.4))
        t.emit(cmd, out, tool=tool, units=(i + 1, len(tables)))
    t.emit("psql -c '\\dt+'", "\n".join(f" public | {tb} | table | app | {t.num(t.rng.uniform(1, 900), 1)} MB" for tb in tables), tool="psql")
    return t.script(actions)


@healthy
def iac_drift_scan(rng: random.Random, actions: bool) -> Script:
    """``terraform plan`` across every workspace for drift: most say "No changes", counted as scanned."""
    t = T2(rng)
    teams = ("payments", "identity", "search", "data", "growth", "platform", "mobile", "billing", "infra", "ml")
    parts = ("network", "dns", "iam", "buckets", "queues", "db", "cache", "cdn", "k8s", "monitoring")
    combos = [f"{a}-{b}-{e}" for a in teams for b in parts for e in ("dev", "stg", "prod")]
    envs = t.rng.sample(combos, t.rng.randint(10, 24))
    ver = f"1.{t.rng.randint(5, 9)}.{t.rng.randint(0, 5)}"
    t.emit(None, f"Scanning {len(envs)} workspaces for drift with Terraform v{ver}.", units=(0, len(envs)))
    drifted = 0
    for i, ws in enumerate(envs):
        if t.rng.random() < 0.2:
            drifted += 1
            res = t.rng.choice(("aws_security_group.ingress", "aws_iam_role_policy.app", "google_storage_bucket.logs", "azurerm_dns_a_record.api"))
            out = (f"Workspace \"{ws}\"\nRefreshing state... [id={t.hexid(17)}]\n  # {res} has changed\n"
                   f"Plan: 0 to add, 1 to change, 0 to destroy.")
        else:
            out = (f"Workspace \"{ws}\"\nRefreshing state... [id={t.hexid(17)}]\n"
                   "No changes. Your infrastructure matches the configuration.")
        t.emit(f"terraform -chdir=stacks/{ws} plan -detailed-exitcode -lock=false", out, tool="terraform",
               units=(i + 1, len(envs)))
    t.emit(None, f"Drift scan finished: {drifted} of {len(envs)} workspaces drifted; issues filed.", units=(len(envs), len(envs)))
    return t.script(actions)


@healthy
def queue_consumer_drain(rng: random.Random, actions: bool) -> Script:
    """A worker draining a dead-letter queue batch by batch; depth falls, each batch other messages."""
    t = T2(rng)
    q = f"{t.rng.choice(SERVICES)}-{t.choose('dlq', 'retry', 'events-dead')}"
    depth = t.rng.randint(2_000, 80_000)
    t.emit(f"aws sqs get-queue-attributes --queue-url https://sqs.{t.rng.choice(REGIONS)}.amazonaws.com/{t.rng.randint(10**11, 10**12)}/{q}",
           f'{{"Attributes": {{"ApproximateNumberOfMessages": "{depth}"}}}}', tool="aws")
    for _ in range(t.rng.randint(12, 30)):
        n = min(depth, t.rng.randint(200, max(300, depth // 8)))
        depth -= n
        kinds = {t.choose("OrderCreated", "RefundIssued", "StockAdjusted", "UserMerged", "InvoiceVoided"): t.rng.randint(1, n) for _ in range(3)}
        summary = ", ".join(f"{k}={t.num(v)}" for k, v in kinds.items())
        t.emit(f"python redrive.py --queue {q} --batch {n}",
               f"{t.stamp()} redriven {t.num(n)} messages ({summary}); first={t.rid()} last={t.rid()}; "
               f"{t.num(depth)} left; took {t.took(t.rng.uniform(2, 40))}", tool="python")
        if depth <= 0:
            break
    t.emit(None, f"Queue {q} drained.")
    return t.script(actions)


# ---------------------------------------------------------------------------------------------- loops
@looping
def oscillating_limits_fix(rng: random.Random, actions: bool) -> Script:
    """Memory limit raised, pods Pending (no room); lowered again, OOMKilled; raised again … (A→B→A)."""
    t = T2(rng)
    app = t.rng.choice(SERVICES)
    lo, hi = t.choose("512Mi", "1Gi", "768Mi"), t.choose("4Gi", "6Gi", "8Gi")
    for _ in range(prefix(t)):
        t.emit(f"kubectl top pod -l app={app} --containers",
               "\n".join(f"{app}-{t.slug(9)}-{t.slug(5)}  app  {t.rng.randint(20, 900)}m  {t.rng.randint(200, 1000)}Mi" for _ in range(3)), tool="kubectl")
    t.loop(period=4)  # a cycle: set A, its error; set B, its error
    for k in range(loop_reports(t, 4) // 2):
        limit = hi if k % 2 == 0 else lo
        t.emit(f"kubectl set resources deploy/{app} --limits=memory={limit}", f"deployment.apps/{app} resource requirements updated",
               tool="kubectl", note=t.say(f"Trying memory={limit}.", f"Switching the limit to {limit}.", f"Let me set {limit} instead.", ""))
        pod = f"{app}-{t.slug(9)}-{t.slug(5)}"
        if limit == hi:
            out = (f"{pod}   0/1   Pending   0   {t.rng.randint(5, 90)}s\n"
                   f"Events: Warning  FailedScheduling  0/6 nodes are available: 6 Insufficient memory.")
        else:
            out = (f"{pod}   0/1   OOMKilled   {t.rng.randint(1, 4)}   {t.rng.randint(5, 90)}s\n"
                   "Last State: Terminated  Reason: OOMKilled  Exit Code: 137")
        t.emit(f"kubectl get pods -l app={app}", out, tool="kubectl")
    return t.script(actions)


@looping
def queue_poll_empty(rng: random.Random, actions: bool) -> Script:
    """Long-polls a queue that never fills, without declaring a wait: only receipt ids and stamps move."""
    t = T2(rng)
    q = f"{t.rng.choice(SERVICES)}-jobs"
    for i in range(prefix(t)):
        t.emit(f"python worker.py --queue {q} --once", f"processed job {t.rid()} ({t.choose('resize', 'email', 'export')}) in {t.took(t.rng.uniform(0.2, 8))}", tool="python")
    t.loop()
    style = t.rng.randrange(3)
    for _ in range(loop_reports(t)):
        if style == 0:
            out = f'{{"Messages": [], "ResponseMetadata": {{"RequestId": "{t.rid()}", "HTTPStatusCode": 200}}}}'
            cmd = f"aws sqs receive-message --queue-url $Q --wait-time-seconds {t.rng.choice((10, 20))}"
        elif style == 1:
            out = f"{t.stamp()} INFO consumer[{t.rng.randint(1000, 9999)}] poll returned 0 records (waited {t.took(t.rng.uniform(9, 20))})"
            cmd = f"kafka-console-consumer --topic {q} --max-messages 1 --timeout-ms 20000"
        else:
            out = f"(nil)\n(waited {t.took(t.rng.uniform(4, 30))})"
            cmd = f"redis-cli BRPOP {q} {t.rng.choice((5, 10, 30))}"
        t.emit(cmd, out, tool=cmd.split()[0], note=t.say("Still nothing; polling again.", "Queue empty, retry.", "", "Checking once more."))
    return t.script(actions)


@looping
def terraform_state_lock(rng: random.Random, actions: bool) -> Script:
    """``terraform apply`` again and again while another run holds the state lock."""
    t = T2(rng)
    ws = f"{t.choose('core', 'net', 'data')}-{t.rng.choice(('stg', 'prod'))}"
    warmup(t, [
        ("terraform", f"terraform -chdir=stacks/{ws} init -upgrade", f"Initializing provider plugins...\n- Installing hashicorp/aws v5.{t.rng.randint(30, 80)}.0...\nTerraform has been successfully initialized!"),
        ("terraform", f"terraform -chdir=stacks/{ws} fmt -check -recursive", f"modules/vpc/main.tf\nmodules/{t.choose('rds', 'eks', 'sqs')}/variables.tf"),
        ("terraform", f"terraform -chdir=stacks/{ws} fmt -recursive", "modules/vpc/main.tf (2 blocks realigned)"),
        ("terraform", f"terraform -chdir=stacks/{ws} validate", "Success! The configuration is valid."),
        ("git", "git diff --stat", f" stacks/{ws}/variables.tf | {t.rng.randint(2, 30)} ++--\n 1 file changed"),
        ("terraform", f"terraform -chdir=stacks/{ws} plan -out=tfplan", f"Plan: {t.rng.randint(1, 5)} to add, {t.rng.randint(0, 3)} to change, 0 to destroy.\nSaved the plan to: tfplan"),
        ("terraform", f"terraform -chdir=stacks/{ws} show -no-color tfplan | head -20", f"  # aws_sqs_queue.{t.choose('orders', 'events')} will be created\n  + resource \"aws_sqs_queue\" {{ visibility_timeout_seconds = {t.rng.choice((30, 60, 300))} }}"),
        ("terraform", f"terraform -chdir=stacks/{ws} state list | wc -l", f"{t.rng.randint(40, 400)}"),
    ])
    lock_id, who, since = t.rid(), t.choose("ci@runner-12", "alice@laptop", "atlantis"), t.stamp()
    t.loop()
    for _ in range(loop_reports(t)):
        flags = t.rng.sample(("-auto-approve", "-input=false", "-lock-timeout=30s", "-parallelism=4", "-refresh=true"), t.rng.randint(1, 3))
        t.emit(f"terraform -chdir=stacks/{ws} apply {' '.join(flags)}",
               f"Acquiring state lock. This may take a few moments...\n╷\n│ Error: Error acquiring the state lock\n│\n"
               f"│ Error message: ConditionalCheckFailedException: The conditional request failed\n│ Lock Info:\n"
               f"│   ID:        {lock_id}\n│   Path:      tf-state/{ws}/terraform.tfstate\n│   Operation: OperationTypeApply\n"
               f"│   Who:       {who}\n│   Created:   {since}\n│ (request {t.rid()}, {t.took(t.rng.uniform(1, 31))})\n╵",
               tool="terraform")
    return t.script(actions)


@looping
def sql_migrate_rerun(rng: random.Random, actions: bool) -> Script:
    """The same migration rerun with other flags: "relation already exists" every time."""
    t = T2(rng)
    tb = t.choose("invoices", "sessions", "events", "refunds")
    warmup(t, [
        ("psql", f"psql -c 'select count(*) from {tb}'", f" count\n-------\n {t.num(t.rng.randint(1000, 10**7))}\n(1 row)"),
        ("psql", f"psql -c '\\d {tb}'", f"Table \"public.{tb}\"\n id | bigint | not null\n created_at | timestamptz | not null\n amount | numeric(12,2) |"),
        ("flyway", "flyway info", f"| Versioned | {t.rng.randint(30, 39)} | add {tb} indexes | Success |\n| Versioned | {t.rng.randint(40, 200)} | create {tb} archive | Pending |"),
        ("cat", f"cat db/migration/V*__create_{tb}_archive.sql", f"CREATE TABLE {tb}_archive (LIKE {tb} INCLUDING ALL);"),
        ("psql", "psql -c 'select version()'", f"PostgreSQL {t.rng.randint(13, 17)}.{t.rng.randint(1, 9)} on x86_64-pc-linux-gnu"),
        ("git", "git log --oneline -3 -- db/migration", f"{t.hexid(7)} archive old {tb}\n{t.hexid(7)} index {tb}.created_at\n{t.hexid(7)} initial schema"),
        ("pg_dump", f"pg_dump --schema-only -t {tb} | wc -l", f"{t.rng.randint(30, 200)}"),
        ("psql", "psql -c 'select pg_size_pretty(pg_database_size(current_database()))'", f" {t.rng.randint(2, 900)} GB"),
    ])
    t.loop()
    v = t.rng.randint(40, 200)
    for _ in range(loop_reports(t)):
        cmd = t.choose("flyway migrate -outOfOrder=true", "flyway migrate", "flyway -baselineOnMigrate=true migrate",
                       f"flyway migrate -target={v}", "flyway repair && flyway migrate")
        t.emit(cmd, f"Flyway Community Edition 10.{t.rng.randint(0, 20)}.0\nMigrating schema \"public\" to version \"{v} - create {tb} archive\"\n"
               f"ERROR: Migration V{v}__create_{tb}_archive.sql failed\nSQL State  : 42P07\nMessage    : ERROR: relation \"{tb}_archive\" already exists\n"
               f"Location   : db/migration/V{v}__create_{tb}_archive.sql (/app/{t.tmp('flyway')})\nLine       : 1\nTook {t.took(t.rng.uniform(0.3, 3))}",
               tool="flyway", note=t.say("Retrying the migration.", "Maybe with the flag it goes through.", "", "Again, with a repair first."))
    return t.script(actions)


@looping
def jittered_backoff_retry(rng: random.Random, actions: bool) -> Script:
    """A client retrying a dead upstream with jittered backoff: new request ids and delays, the same reset."""
    t = T2(rng)
    host = f"{t.rng.choice(SERVICES)}.{t.choose('internal', 'svc.cluster.local', 'corp')}"
    warmup(t, [
        ("curl", f"curl -s https://{host}/v1/health", f'{{"status":"ok","build":"{t.hexid(7)}"}}'),
        ("cat", "cat sync_client.toml", f"[client]\nendpoint = \"https://{host}/v1\"\nmax_retries = 0  # unlimited\nbase_delay = 0.5"),
        ("python", "python sync_client.py --dry-run", f"would export {t.num(t.rng.randint(1000, 90000))} orders since {t.stamp()}"),
        ("dig", f"dig +short {host}", f"10.{t.rng.randint(0, 255)}.{t.rng.randint(0, 255)}.{t.rng.randint(1, 254)}"),
        ("python", "python -m pytest tests/test_client.py -q", f"{t.rng.randint(8, 40)} passed in {t.took(t.rng.uniform(0.5, 9))}"),
        ("git", "git log -1 --format=%s", "export: stream orders instead of paging"),
        ("curl", f"curl -sI https://{host}/v1/orders/export", "HTTP/2 405\nallow: POST"),
        ("python", "python sync_client.py --since yesterday --limit 10", f"exported 10 orders ({t.took(t.rng.uniform(0.2, 3))})"),
    ])
    t.loop()
    attempt = t.rng.randint(1, 3)
    for _ in range(loop_reports(t)):
        attempt += 1
        delay = min(60.0, 0.5 * 2 ** min(attempt, 7)) * t.rng.uniform(0.5, 1.5)
        t.emit(f"python sync_client.py --endpoint https://{host}/v1/orders/export",
               t.choose(f"{t.stamp()} WARNING attempt {attempt} failed request_id={t.rid()}: ConnectionResetError(104, 'Connection reset by peer'); retrying in {t.took(delay)}",
                        f"[{t.stamp()}] retry #{attempt} (x-request-id {t.rid()}) -> connection reset by peer; backing off {t.took(delay)}"),
               tool="python", gap=t.gap() + min(delay, 0.3 * t.lease))
    return t.script(actions)
