"""Ops agents: deploys, rollouts, restores, infrastructure changes, incident logs."""

from __future__ import annotations

import random

from ..stalls import Script
from . import noise, phrases
from .trace import Trial, healthy, looping, pick
from .words import NOUNS, PROJECTS, SUBDIRS


def _svc(rng: random.Random) -> str:
    return f"{rng.choice(PROJECTS)}-{rng.choice(('api', 'web', 'worker', 'gateway', 'scheduler'))}"


@healthy
def rolling_deploy(rng: random.Random, actions: bool) -> Script:
    """Roll a deployment out: replicas replaced one by one, new pods named each time."""
    t = Trial(rng)
    svc = _svc(rng)
    n = rng.randint(4, 16)
    ns = pick(rng, "prod", "default", "payments", "staging")
    t.emit(f"kubectl -n {ns} set image deploy/{svc} app=registry.example.com/{svc}:{noise.hexid(rng, 7)}",
           f"deployment.apps/{svc} image updated", tool="kubectl")
    for k in range(1, n + 1):
        if rng.random() < 0.5:
            t.emit(f"kubectl -n {ns} rollout status deploy/{svc} --timeout=10s",
                   f'Waiting for deployment "{svc}" rollout to finish: {k} of {n} updated replicas are available...', tool="kubectl",
                   units=(k, n))
        else:
            pods = "\n".join(f"{noise.pod(rng, svc)}   {pick(rng, '1/1   Running', '0/1   ContainerCreating', '0/1   Running')}   0   "
                             f"{rng.randint(1, 59)}s" for _ in range(rng.randint(1, 3)))
            t.emit(f"kubectl -n {ns} get pods -l app={svc}", f"NAME   READY   STATUS   RESTARTS   AGE\n{pods}", tool="kubectl", units=(k, n))
    t.emit(f"kubectl -n {ns} rollout status deploy/{svc}", f'deployment "{svc}" successfully rolled out', tool="kubectl", units=(n, n))
    return t.script(actions)


@healthy
def incident_logs(rng: random.Random, actions: bool) -> Script:
    """Investigate an incident through logs: each query narrows down and finds something else."""
    t = Trial(rng)
    svc = _svc(rng)
    for _ in range(rng.randint(10, 20)):
        err = pick(rng, "TimeoutError", "ConnectionResetError", "OOMKilled", "HTTP 502", "deadlock", "certificate expired",
                   "429 Too Many Requests", "NullPointerException", "disk full", "context deadline exceeded")
        where = f"{rng.choice(SUBDIRS)}/{rng.choice(NOUNS)}"
        q = pick(rng, f'{{app="{svc}"}} |= "{err}"', f"grep -c '{err}' /var/log/{svc}/*.log", f"kubectl logs -l app={svc} --since=1h | grep '{err}'")
        hosts = ", ".join(noise.pod(rng, svc) for _ in range(rng.randint(1, 3)))
        out = (f"{t.n(rng.randint(1, 40000))} matches in the last hour, first at {noise.stamp(t.now - rng.randint(60, 3600), t.ts_style)}\n"
               f"top sources: {hosts}\nsample: {t.ts()} ERROR [{where}] {err} after {t.dur(rng.uniform(0.1, 30))} "
               f"(trace_id={noise.hexid(rng, 32)})")
        t.emit(q, out, tool="logs")
        if rng.random() < 0.4:
            t.emit(None, pick(rng, f"Hypothesis: {err} in {where} started after the {rng.choice(NOUNS)} deploy.",
                              f"Ruled out {where}: {err} count there is flat.", f"Correlates with {rng.choice(NOUNS)} traffic spike."))
    return t.script(actions)


@healthy
def db_restore(rng: random.Random, actions: bool) -> Script:
    """Restore a database from a backup: long quiet stretches, then progress in bytes and tables."""
    t = Trial(rng)
    size = rng.randint(20, 900) * 2**30
    done = 0
    tables = [f"{rng.choice(NOUNS)}_{rng.choice(NOUNS)}" for _ in range(40)]
    while done < size and len(t.beats) < 30:
        done = min(size, done + int(size * rng.uniform(0.03, 0.12)))
        if rng.random() < 0.4:
            t.advance(t.long(0.1, 0.35))
        tb = rng.choice(tables)
        t.emit("tail -n 2 /var/log/restore.log", f"{t.ts()} pg_restore: processing data for table \"public.{tb}\"\n"
               f"{t.ts()} restored {noise.size(done, t.num_style)} of {noise.size(size, t.num_style)} "
               f"{noise.pct(100 * done / size, t.num_style)}", units=(done / 2**20, size / 2**20))
    return t.script(actions)


@healthy
def terraform_apply(rng: random.Random, actions: bool) -> Script:
    """``terraform apply`` creating resources one after another, each with the id the cloud gave it."""
    t = Trial(rng)
    kinds = (("aws_instance", lambda: f"i-0{noise.hexid(rng, 16)}"), ("aws_security_group", lambda: f"sg-0{noise.hexid(rng, 16)}"),
             ("aws_s3_bucket", lambda: f"{rng.choice(PROJECTS)}-{noise.hexid(rng, 6)}"), ("aws_iam_role", lambda: t.names.ident("-")),
             ("aws_db_instance", lambda: f"db-{noise.b62(rng, 26).upper()}"), ("aws_lb", lambda: f"arn:aws:elasticloadbalancing:"
                                                                                          f"eu-west-1:{rng.randint(10**11, 10**12)}:loadbalancer/app/{noise.hexid(rng, 16)}"),
             ("aws_route53_record", lambda: f"Z{noise.b62(rng, 13).upper()}_{t.names.host()}_A"))
    n = rng.randint(8, 24)
    cmd = pick(rng, "terraform apply -auto-approve", "terraform apply tfplan", "tofu apply -auto-approve")
    for k in range(n):
        kind, make = rng.choice(kinds)
        name = f"{kind}.{t.names.ident()}{pick(rng, '', f'[{rng.randint(0, 5)}]')}"
        secs = rng.uniform(1, 400)
        if secs > 60 and rng.random() < 0.5:
            t.emit(cmd, f"{name}: Still creating... [{int(secs // 2)}s elapsed]", tool="stream")
        t.emit(cmd, f"{name}: Creation complete after {int(secs)}s [id={make()}]", tool="stream", units=(k + 1, n))
    t.emit(cmd, f"Apply complete! Resources: {n} added, 0 changed, 0 destroyed.", tool="stream", units=(n, n))
    return t.script(actions)


@healthy
def cert_rotation(rng: random.Random, actions: bool) -> Script:
    """Rotate TLS certificates host by host and verify each new one."""
    t = Trial(rng)
    hosts = [f"{rng.choice(('edge', 'lb', 'api', 'mq', 'db'))}-{rng.randint(1, 40):02d}.{rng.choice(('eu', 'us', 'ap'))}.internal"
             for _ in range(rng.randint(6, 14))]
    hosts = sorted(set(hosts))
    for i, h in enumerate(hosts):
        t.emit(f"ssh {h} 'sudo certbot renew --cert-name {h} && sudo systemctl reload nginx'",
               f"Renewing an existing certificate for {h}\nCongratulations, all renewals succeeded:\n  /etc/letsencrypt/live/{h}/fullchain.pem (success)",
               units=(i, len(hosts)))
        t.emit(f"openssl s_client -connect {h}:443 </dev/null | openssl x509 -noout -serial -enddate",
               f"serial={noise.hexid(rng, 36).upper()}\nnotAfter={noise.stamp(t.now + 90 * 86400, 7).replace('GMT', '').strip()} GMT",
               units=(i + 1, len(hosts)))
    return t.script(actions)


@healthy
def dns_propagation_wait(rng: random.Random, actions: bool) -> Script:
    """Switch a DNS record, declare a wait for it to propagate, poll resolvers, then go on when it has."""
    t = Trial(rng, rate=rng.uniform(10, 60))
    host = t.names.host()
    old, new = noise.ip(rng), noise.ip(rng)
    t.emit(f"aws route53 change-resource-record-sets --hosted-zone-id Z{noise.b62(rng, 12).upper()} ...",
           f'{{"ChangeInfo": {{"Id": "/change/C{noise.b62(rng, 12).upper()}", "Status": "PENDING"}}}}', tool="aws")
    wait_s = rng.choice((600.0, 900.0, 1800.0))
    started = t.now
    resolvers = ("1.1.1.1", "8.8.8.8", "9.9.9.9")
    while t.now - started < 0.6 * wait_s and len(t.beats) < 30:
        r = rng.choice(resolvers)
        t.emit(f"dig +short {host} @{r}", old, tool="bash", wait=("dns", wait_s))
    for r in resolvers:
        t.emit(f"dig +short {host} @{r}", new)
    t.emit(f"curl -sI https://{host}/", f"HTTP/2 200\nserver: nginx\ndate: {noise.stamp(t.now, 7)}\nx-served-by: {new}")
    for _ in range(rng.randint(2, 5)):
        t.emit(f"curl -s https://{host}/{t.names.slug()}", f"HTTP 200 {noise.size(rng.randint(1000, 90000), 0)} {t.names.ident()}")
    return t.script(actions)


# ---------------------------------------------------------------------- loops
def _prefix(t: Trial, svc: str) -> None:
    rng = t.rng
    for _ in range(rng.randint(2, 6)):
        t.emit(f"kubectl get {pick(rng, 'svc', 'ingress', 'configmap', 'hpa')} {svc}-{rng.choice(NOUNS)}",
               f"NAME   AGE\n{svc}-{rng.choice(NOUNS)}-{noise.hexid(rng, 5)}   {rng.randint(1, 90)}d", tool="kubectl")


@looping
def crashloop_restart(rng: random.Random, actions: bool) -> Script:
    """Delete the crashing pod, read the new pod's logs: the same crash under a new pod name."""
    t = Trial(rng)
    svc = _svc(rng)
    _prefix(t, svc)
    crash = pick(rng, f"Error: missing required env var {rng.choice(NOUNS).upper()}_URL",
                 "panic: runtime error: invalid memory address or nil pointer dereference",
                 "java.lang.OutOfMemoryError: Java heap space", "ModuleNotFoundError: No module named 'app.settings'")
    describe = rng.random() < 0.5
    period = 3 if describe else 2
    t.loop(period)
    for _ in range(-(-(5 + rng.randint(3, 10)) // period)):
        p = noise.pod(rng, svc)
        t.emit(f"kubectl delete pod -l app={svc}", f'pod "{p}" deleted', tool="kubectl")
        if describe:
            t.emit(f"kubectl get pods -l app={svc}", f"NAME   READY   STATUS   RESTARTS   AGE\n{noise.pod(rng, svc)}   0/1   CrashLoopBackOff   "
                   f"{rng.randint(1, 4)}   {rng.randint(10, 90)}s", tool="kubectl")
        t.emit(f"kubectl logs -l app={svc} --tail=5", f"{t.ts()} starting {svc} version 1.4.2\n{t.ts()} {crash}",
               tool="kubectl")
    return t.script(actions)


REWORDS = ("could not connect to {db} at {addr}: connection refused", "connection to {db} failed ({addr}), retrying in {s}s",
           "{db} unreachable at {addr}; backing off {s}s", "failed to open pool to {db}: dial tcp {addr}: connect: connection refused",
           "retrying database connection ({db}, {addr}) after {s}s", "waiting for {db} at {addr} to accept connections",
           "dial {addr}: connection refused — will retry", "{db}: still not reachable ({addr})", "health: {db} DOWN (connect {addr})")


@looping
def log_tail_reworded(rng: random.Random, actions: bool) -> Script:
    """Tail a log that grows with retries worded a dozen ways; its new tail never says anything new."""
    t = Trial(rng)
    svc = _svc(rng)
    _prefix(t, svc)
    db, addr = pick(rng, "postgres", "redis", "mysql", "kafka"), f"{noise.ip(rng)}:{rng.choice((5432, 6379, 3306, 9092))}"
    attempt = rng.randint(1, 20)
    t.loop()
    for _ in range(5 + rng.randint(3, 10)):
        lines = []
        for _ in range(rng.randint(2, 6)):
            attempt += 1
            msg = rng.choice(REWORDS).format(db=db, addr=addr, s=rng.choice((1, 2, 4, 8, 16, 30)))
            lines.append(f"{t.ts()} {pick(rng, 'WARN', 'ERROR', 'INFO')} [{svc}] {msg}" + pick(rng, "", f" (attempt {attempt})"))
        t.emit(f"tail -n {len(lines)} /var/log/{svc}.log", "\n".join(lines), tool="bash")
    return t.script(actions)


@looping
def deploy_imagepull(rng: random.Random, actions: bool) -> Script:
    """``helm upgrade`` again and again; every revision's pods sit in ImagePullBackOff."""
    t = Trial(rng)
    svc = _svc(rng)
    _prefix(t, svc)
    tag = noise.hexid(rng, 7)
    rev = rng.randint(3, 90)
    t.loop(2)
    for _ in range(-(-(5 + rng.randint(3, 10)) // 2)):
        rev += 1
        t.emit(f"helm upgrade {svc} ./chart --set image.tag={tag}", f'Release "{svc}" has been upgraded. Happy Helming!\nNAME: {svc}\n'
               f"LAST DEPLOYED: {noise.stamp(t.now, 7)}\nNAMESPACE: prod\nSTATUS: deployed\nREVISION: {rev}", tool="helm")
        t.emit(f"kubectl get pods -l app={svc}", f"NAME   READY   STATUS   RESTARTS   AGE\n{noise.pod(rng, svc)}   0/1   ImagePullBackOff   0   "
               f"{rng.randint(5, 80)}s\n  Failed to pull image \"registry.example.com/{svc}:{tag}\": not found", tool="kubectl")
    return t.script(actions)


@looping
def health_poll_503(rng: random.Random, actions: bool) -> Script:
    """Poll a health endpoint that keeps answering 503, without declaring any wait."""
    t = Trial(rng)
    svc = _svc(rng)
    _prefix(t, svc)
    url = f"https://{svc}.internal/healthz"
    style = rng.randrange(5)
    t.loop()
    for _ in range(5 + rng.randint(3, 10)):
        t.emit(f"curl -s -w '%{{http_code}}' {url}", f'{{"status": "unavailable", "checks": {{"db": "down"}}, "request_id": '
               f'"{noise.request_id(rng, style)}", "time": "{t.ts()}"}}503', tool="bash",
               note=rng.choice((None, None, phrases.still(rng, "503"))))
    return t.script(actions)
