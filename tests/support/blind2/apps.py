"""Software delivery beyond the editor: mobile app builds, code-review bots, security scanners,
API contract tests, web scrapers that honour rate limits."""

from __future__ import annotations

import random

from ..stalls import Script
from .base import T2, healthy, loop_reports, looping, prefix, warmup

MODULES = ("app", "core", "feature-login", "feature-cart", "data", "network", "ui-kit", "analytics", "payments-sdk")
FILES = ("src/api/client.ts", "src/components/Cart.tsx", "lib/auth/session.py", "internal/store/cache.go", "app/models/order.rb",
         "src/main/java/com/acme/Billing.java", "pkg/queue/worker.go", "web/routes/admin.py", "src/utils/date.ts",
         "services/notify/mailer.py", "cmd/server/main.go", "src/hooks/useSearch.ts", "db/queries/report.sql")


# ---------------------------------------------------------------------------------------------- healthy
@healthy
def mobile_release_build(rng: random.Random, actions: bool) -> Script:
    """A fastlane release: tests, one Gradle or Xcode phase after another, long archive silences, upload."""
    t = T2(rng)
    ios = t.rng.random() < 0.5
    ver = f"{t.rng.randint(1, 9)}.{t.rng.randint(0, 30)}.{t.rng.randint(0, 9)}"
    build = t.rng.randint(100, 9999)
    t.emit("bundle exec fastlane ios beta" if ios else "bundle exec fastlane android beta",
           f"[{t.stamp()}]: ------------------------------\n[{t.stamp()}]: --- Step: default_platform ---\n"
           f"[{t.stamp()}]: Driving the lane '{'ios' if ios else 'android'} beta' 🚀", tool="fastlane")
    if ios:
        phases = ["match(type: 'appstore')", "increment_build_number", "cocoapods", "scan", "gym", "pilot"]
    else:
        phases = [f":{m}:compileReleaseKotlin" for m in t.rng.sample(MODULES, t.rng.randint(3, 6))] + \
                 [":app:bundleRelease", ":app:signReleaseBundle", "supply(track: 'internal')"]
    for ph in phases:
        if ph in ("gym", ":app:bundleRelease", "scan"):
            t.keeper(t.long(0.2, 0.4))
        out = {
            "match(type: 'appstore')": f"🔓 Successfully decrypted certificates repo\nInstalled certificate {t.hexid(40).upper()}",
            "increment_build_number": f"Setting build number to {build}",
            "cocoapods": f"Pod installation complete! There are {t.rng.randint(20, 90)} dependencies from the Podfile and {t.rng.randint(40, 200)} total pods installed.",
            "scan": f"Test Succeeded: {t.rng.randint(200, 1400)} tests, 0 failures ({t.took(t.rng.uniform(60, 900))})",
            "gym": f"Successfully exported and compressed dSYM file\nSuccessfully exported and signed the ipa file:\n/Users/runner/Library/Developer/Xcode/Archives/{t.hexid(8)}/App.ipa",
            "pilot": f"Successfully uploaded package to App Store Connect. It might take a few minutes until it's visible online. ({t.num(t.rng.uniform(40, 300), 1)} MB)",
            ":app:bundleRelease": f"BUILD SUCCESSFUL in {t.took(t.rng.uniform(90, 900))}\n{t.rng.randint(300, 900)} actionable tasks: {t.rng.randint(50, 300)} executed, {t.rng.randint(100, 600)} up-to-date",
            ":app:signReleaseBundle": f"Signed app-release.aab with key alias upload (SHA-256 {t.hexid(16)})",
            "supply(track: 'internal')": f"Uploading AAB: app-release.aab\nUpdating track 'internal' with version code {build}\nSuccessfully finished the upload to Google Play",
        }.get(ph, f"> Task {ph}\nw: {t.rng.choice(FILES)}:{t.rng.randint(5, 400)}:{t.rng.randint(1, 60)} '{t.choose('onActivityResult', 'getColor', 'Handler()')}' is deprecated")
        t.emit(f"fastlane run {ph}" if not ph.startswith(":") else f"./gradlew {ph}", out, tool="fastlane" if not ph.startswith(":") else "gradlew")
    t.emit(None, f"Release {ver} ({build}) is on the {'TestFlight' if ios else 'internal'} track.")
    return t.script(actions)


@healthy
def code_review_bot(rng: random.Random, actions: bool) -> Script:
    """A review bot reads a pull request file by file and posts comments on other lines each time."""
    t = T2(rng)
    pr = t.rng.randint(100, 30000)
    files = t.rng.sample(FILES, t.rng.randint(5, 11))
    t.emit(f"gh pr view {pr} --json files,additions,deletions",
           f'{{"additions": {t.rng.randint(50, 3000)}, "deletions": {t.rng.randint(5, 900)}, "files": {len(files)}}}', tool="gh")
    for f in files:
        hunks = t.rng.randint(1, 5)
        start = t.rng.randint(1, 500)
        diff = "\n".join(f"@@ -{start + 30 * h},{t.rng.randint(3, 20)} +{start + 30 * h},{t.rng.randint(3, 25)} @@ "
                         f"{t.choose('def ', 'func ', 'export function ', 'class ')}{t.choose('load', 'save', 'render', 'retry', 'parse', 'validate')}{t.slug(3).title()}"
                         for h in range(hunks))
        t.emit(f"gh pr diff {pr} -- {f}", diff, tool="gh")
        if t.rng.random() < 0.7:
            line = start + t.rng.randint(0, 30 * hunks)
            body = t.choose("This swallows the error; log or re-raise it?", "Possible nil dereference when the cache misses.",
                            "Consider a parameterised query here.", "Off-by-one: the range excludes the last page.",
                            "The retry has no upper bound.", "Nit: name shadows the builtin.", "This allocates inside the hot loop.")
            t.emit(f"gh api repos/acme/shop/pulls/{pr}/comments -f path={f} -F line={line} -f body='{body}'",
                   f'{{"id": {t.rng.randint(10**8, 10**9)}, "path": "{f}", "line": {line}, "html_url": "https://github.com/acme/shop/pull/{pr}#discussion_r{t.rng.randint(10**8, 10**9)}"}}',
                   tool="gh")
    t.emit(f"gh pr review {pr} --comment -b 'Summary: …'", f"- Reviewed pull request #{pr}", tool="gh")
    return t.script(actions)


@healthy
def security_scan_triage(rng: random.Random, actions: bool) -> Script:
    """Triage of a scanner's findings one CVE or rule at a time: each has its own package, path and verdict."""
    t = T2(rng)
    scanner = t.choose("trivy", "grype", "semgrep", "snyk")
    n = t.rng.randint(8, 20)
    t.emit(f"{scanner} {'image registry/app:latest' if scanner in ('trivy', 'grype') else 'scan --json .'}",
           f"Total: {n} (CRITICAL: {t.rng.randint(0, 3)}, HIGH: {t.rng.randint(2, 9)}, MEDIUM: {t.rng.randint(3, 15)})", tool=scanner)
    pkgs = ("openssl", "libxml2", "lodash", "jackson-databind", "golang.org/x/net", "urllib3", "glibc", "curl", "pillow", "express", "netty-codec-http")
    for i in range(n):
        cve = f"CVE-{t.rng.randint(2019, 2025)}-{t.rng.randint(1000, 49999)}"
        pkg = t.rng.choice(pkgs)
        verdict = t.choose("reachable: the vulnerable parser is called from the upload handler → fix now",
                           "not reachable: only the test fixtures import it → accept with expiry",
                           "fixed upstream in the next minor → bump", "false positive: vendored copy already patched")
        t.emit(f"{scanner} explain {cve}" if scanner != "semgrep" else f"semgrep --config p/{t.choose('owasp-top-ten', 'secrets', 'python')} --json {t.rng.choice(FILES)}",
               f"{cve} {pkg} {t.rng.randint(0, 3)}.{t.rng.randint(0, 20)}.{t.rng.randint(0, 9)} → fixed in {t.rng.randint(1, 4)}.{t.rng.randint(0, 30)}.{t.rng.randint(0, 9)}\n"
               f"CVSS {t.num(t.rng.uniform(4, 9.9), 1)} · path: {t.rng.choice(FILES)}", tool=scanner, units=(i + 1, n))
        t.emit(None, f"{cve} ({pkg}): {verdict}")
    return t.script(actions)


@healthy
def newman_collections(rng: random.Random, actions: bool) -> Script:
    """API contract tests run folder by folder with newman; every folder other requests and timings."""
    t = T2(rng)
    folders = t.rng.sample(("auth", "users", "orders", "payments", "webhooks", "search", "admin", "reports", "files", "billing"), t.rng.randint(5, 9))
    for f in folders:
        reqs = t.rng.randint(4, 30)
        lines = [f"→ {t.choose('GET', 'POST', 'PUT', 'DELETE')} {{{{base}}}}/{f}/{t.slug(6)}  [{t.choose('200 OK', '201 Created', '204 No Content')}, "
                 f"{t.num(t.rng.uniform(0.2, 90), 1)}kB, {t.took(t.rng.uniform(0.01, 2))}]" for _ in range(min(reqs, 6))]
        t.emit(f"newman run api.postman_collection.json --folder {f} -e staging.json",
               "\n".join(lines) + f"\n│ requests │ {reqs} │ 0 │\n│ assertions │ {reqs * t.rng.randint(2, 5)} │ {t.rng.choice((0, 0, 0, 1))} │",
               tool="newman")
    return t.script(actions)


@healthy
def polite_scraper(rng: random.Random, actions: bool) -> Script:
    """A scraper that honours 429s: it sleeps out the Retry-After, then the next page brings new records."""
    t = T2(rng)
    site = t.choose("https://www.gesetze-example.de/register", "https://opendata.example.gov/api/permits", "https://catalog.example.edu/courses")
    page = 1
    for _ in range(t.rng.randint(14, 30)):
        if t.rng.random() < 0.2:
            wait = t.rng.randint(5, 60)
            t.emit(f"scrape {site}?page={page}", f"HTTP 429 Too Many Requests; Retry-After: {wait}; sleeping {t.took(wait)}", tool="scrape")
            t.advance(min(wait, 0.35 * t.lease))
        items = [f"{t.choose('Permit', 'Course', 'Act')} {t.rng.randint(1000, 99999)}: {t.choose('Nordstraße', 'Elm St', 'Calle Mayor', 'Rue de Lyon')} {t.rng.randint(1, 300)}"
                 for _ in range(t.rng.randint(3, 8))]
        t.emit(f"scrape {site}?page={page}", f"200 OK page {page}: {len(items)} records\n" + "\n".join(items), tool="scrape")
        page += 1
    return t.script(actions)


# ---------------------------------------------------------------------------------------------- loops
@looping
def xcode_signing_retry(rng: random.Random, actions: bool) -> Script:
    """xcodebuild archive rerun with shuffled flags and fresh DerivedData: the same provisioning error."""
    t = T2(rng)
    team = "".join(t.rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(10))
    bundle = f"com.{t.choose('acme', 'foo', 'northwind')}.{t.choose('shop', 'notes', 'fit')}"
    warmup(t, [
        ("xcodebuild", "xcodebuild -list", "Information about project \"App\":\n    Targets:\n        App\n        AppTests\n    Schemes:\n        App"),
        ("pod", "pod install", f"Pod installation complete! There are {t.rng.randint(10, 60)} dependencies from the Podfile."),
        ("security", "security find-identity -v -p codesigning", f'  1) {t.hexid(40).upper()} "Apple Distribution: Acme ({team})"\n     1 valid identities found'),
        ("ls", "ls ~/Library/MobileDevice/Provisioning\\ Profiles", f"{t.rid()}.mobileprovision"),
        ("plutil", "plutil -p App/Info.plist | grep -i bundle", f'"CFBundleIdentifier" => "{bundle}"\n"CFBundleShortVersionString" => "{t.rng.randint(1, 5)}.{t.rng.randint(0, 20)}"'),
        ("xcodebuild", "xcodebuild -showBuildSettings | grep CODE_SIGN", f"CODE_SIGN_STYLE = Automatic\nDEVELOPMENT_TEAM = {team}"),
        ("git", "git status --short", " M App.xcodeproj/project.pbxproj\n M App/Info.plist"),
        ("xcodebuild", "xcodebuild test -scheme App -destination 'platform=iOS Simulator,name=iPhone 15'", f"** TEST SUCCEEDED ** [{t.took(t.rng.uniform(30, 300))}]"),
    ])
    t.loop()
    for _ in range(loop_reports(t)):
        flags = t.rng.sample(("-allowProvisioningUpdates", "-quiet", "CODE_SIGN_STYLE=Automatic", "-destination generic/platform=iOS", "-configuration Release"), 2)
        dd = f"/Users/runner/Library/Developer/Xcode/DerivedData/App-{t.slug(28)}"
        t.emit(f"xcodebuild archive -scheme App {' '.join(flags)} -derivedDataPath {dd}",
               f"Build settings from command line: {' '.join(flags)}\n"
               f"/Users/runner/work/App/App.xcodeproj: error: No profiles for '{bundle}' were found: Xcode couldn't find any iOS App Development "
               f"provisioning profiles matching '{bundle}'. (in target 'App' from project 'App')\n** ARCHIVE FAILED ** [{t.took(t.rng.uniform(8, 60))}]\n"
               f"Team {team}; log {dd}/Logs/Build/{t.rid()}.xcactivitylog", tool="xcodebuild",
               note=t.say("Try the archive again with other flags.", "Maybe clearing DerivedData helps.", "", "Retrying the archive."))
    return t.script(actions)


@looping
def review_comment_422(rng: random.Random, actions: bool) -> Script:
    """A review bot reposts one comment on a line outside the diff; GitHub refuses it the same way each time."""
    t = T2(rng)
    pr, f = t.rng.randint(100, 30000), t.rng.choice(FILES)
    line = t.rng.randint(300, 900)
    for _ in range(prefix(t)):
        t.emit(f"gh pr diff {pr} -- {t.rng.choice(FILES)}", f"@@ -{t.rng.randint(1, 200)},7 +{t.rng.randint(1, 200)},9 @@ {t.slug(8)}", tool="gh")
    t.loop()
    for _ in range(loop_reports(t)):
        body = t.choose("This loop never terminates if the queue is closed.", "The loop has no exit when the queue closes.",
                        "If the queue is closed this spins forever.", "Potential infinite loop on a closed queue.")
        t.emit(f"gh api repos/acme/shop/pulls/{pr}/comments -f path={f} -F line={line} -f side=RIGHT -f body='{body}'",
               f'gh: Validation Failed (HTTP 422)\n{{"message":"Validation Failed","errors":[{{"resource":"PullRequestReviewComment",'
               f'"code":"custom","field":"pull_request_review_thread.line","message":"could not be resolved"}}],'
               f'"documentation_url":"https://docs.github.com/rest/pulls/comments#create-a-review-comment-for-a-pull-request"}}\n'
               f"x-github-request-id: {t.hexid(4).upper()}:{t.hexid(6).upper()}:{t.hexid(7).upper()}", tool="gh")
    return t.script(actions)


@looping
def flaky_seed_rerun(rng: random.Random, actions: bool) -> Script:
    """A property test rerun with a new seed every time; it fails on the same shrunk input the same way."""
    t = T2(rng)
    kind = t.rng.randrange(3)
    warmup(t, [
        ("bash", ("go vet ./...", "cargo clippy --all-targets", "npx tsc --noEmit")[kind], f"ok ({t.took(t.rng.uniform(1, 30))})"),
        ("bash", "git log --oneline -3", f"{t.hexid(7)} ring: grow on wrap\n{t.hexid(7)} codec: varint fast path\n{t.hexid(7)} date: local parsing"),
        ("bash", ("go test ./...", "cargo test --lib", "npx jest")[kind], f"{t.rng.randint(40, 400)} tests, 1 failed ({t.took(t.rng.uniform(3, 60))})"),
        ("bash", "git diff --stat HEAD~1", f" {('internal/ring/ring.go', 'src/codec.rs', 'src/date.ts')[kind]} | {t.rng.randint(3, 40)} ++--"),
        ("read_file", ("read internal/ring/ring_test.go", "read src/codec.rs", "read src/date.test.ts")[kind], f"{t.rng.randint(60, 400)} lines"),
        ("bash", "uname -a", f"Linux ci-{t.slug(6)} 6.{t.rng.randint(1, 9)}.0 x86_64 GNU/Linux"),
        ("bash", ("go version", "rustc --version", "node --version")[kind], ("go version go1.22.5 linux/amd64", "rustc 1.79.0 (129f3b996 2024-06-10)", "v20.15.1")[kind]),
    ])
    t.loop()
    for _ in range(loop_reports(t)):
        seed = t.rng.randint(1, 2**31)
        if kind == 0:
            cmd = f"go test ./internal/ring -run TestRingWrap -count=1 -shuffle={seed}"
            out = (f"-test.shuffle {seed}\n--- FAIL: TestRingWrap ({t.took(t.rng.uniform(0.01, 0.5))})\n"
                   f"    ring_test.go:88: got len 7, want 8 after wrap\nFAIL\nFAIL\tgithub.com/acme/q/internal/ring\t{t.rng.uniform(0.1, 2):.3f}s")
        elif kind == 1:
            cmd = f"PROPTEST_RNG_SEED={seed} cargo test decode_roundtrip"
            out = (f"running 1 test\nthread 'codec::tests::decode_roundtrip' panicked at src/codec.rs:212:9:\n"
                   f"Test failed: assertion `left == right` failed; minimal failing input: bytes = [0, 255, 128]\n"
                   f"    successes: {t.rng.randint(0, 40)}\n    local rejects: 0\ntest result: FAILED. 0 passed; 1 failed; finished in {t.took(t.rng.uniform(0.1, 4))}")
        else:
            cmd = f"npx jest src/date.test.ts --seed={seed} --randomize"
            out = (f"Seed:        {seed}\n FAIL  src/date.test.ts\n  ● parseLocal › handles DST start\n\n"
                   f"    expect(received).toBe(expected)\n    Expected: \"02:30\"\n    Received: \"03:30\"\n\n      at Object.<anonymous> (src/date.test.ts:41:27)\n"
                   f"Tests:       1 failed, {t.rng.randint(20, 60)} passed\nTime:        {t.took(t.rng.uniform(1, 9))}")
        t.emit(cmd, out, tool="bash", note=t.say("Flaky? Rerunning with another seed.", "Once more, new seed.", "", "Probably flaky — retry."))
    return t.script(actions)


@looping
def scraper_block_page(rng: random.Random, actions: bool) -> Script:
    """A scraper rotating user agents and proxies, served the same block page with a new reference each time."""
    t = T2(rng)
    url = t.choose("https://www.example-shop.com/category/shoes?page=4", "https://tickets.example.org/events/2211", "https://www.example-news.com/archive/2019")
    base = url.rsplit("/", 1)[0]
    warmup(t, [
        ("scrape", f"scrape {base}/robots.txt", "User-agent: *\nDisallow: /checkout\nCrawl-delay: 2"),
        ("scrape", f"scrape {base}/sitemap.xml", f"{t.rng.randint(200, 9000)} <loc> entries"),
    ] + [("scrape", f"scrape {base}/{t.choose('item', 'event', 'story')}/{t.rng.randint(1000, 99999)}",
          f"200 OK: {t.choose('Trail runner', 'Jazz night', 'Council vote', 'Rain jacket', 'Opening gala')} {t.rng.randint(2, 99)} — "
          f"{t.num(t.rng.uniform(5, 400), 2)} {t.choose('EUR', 'USD', 'GBP')}, {t.rng.randint(0, 500)} reviews") for _ in range(6)])
    t.loop()
    for _ in range(loop_reports(t)):
        ua = t.choose("Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/12" + str(t.rng.randint(0, 9)), "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) Safari/605.1.15",
                      f"Mozilla/5.0 (X11; Linux x86_64; rv:12{t.rng.randint(0, 9)}.0) Firefox/12{t.rng.randint(0, 9)}.0")
        proxy = f"{t.rng.randint(11, 223)}.{t.rng.randint(0, 255)}.{t.rng.randint(0, 255)}.{t.rng.randint(1, 254)}:{t.rng.choice((3128, 8080, 1080))}"
        t.emit(f"scrape {url} --ua '{ua}' --proxy {proxy}",
               f"403 Forbidden\nAccess Denied\nYou don't have permission to access \"{url}\" on this server.\n"
               f"Reference #18.{t.hexid(8)}.{int(t.now)}.{t.hexid(8)}", tool="scrape",
               note=t.say("Blocked; rotating the proxy.", "New user agent, try again.", "", "Switching identity."))
    return t.script(actions)
