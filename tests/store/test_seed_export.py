"""A draft that failed verification is not exported silently (at the final step, check
that what is published is still the draft that was verified). After a verification whose repairs
ran out (the task failed), `warden export` refuses the draft with one line and writes nothing;
`--unverified` writes it with a first line saying so; `warden report` marks it, never current.
A draft that passed exports byte for byte. Both backends."""

from __future__ import annotations

import json
import os

import pytest

from console.cli import main as warden
from store import Ledger, NodeSpec

DRAFT = b"# Pilot report\n\nBackground and a recommendation.\n"


def report_task(ledger, *, passes: bool) -> None:
    ledger.create_task("r", max_repairs=1)
    ledger.add_nodes("r", [NodeSpec("draft"), NodeSpec("verify", deps=("draft",)),
                           NodeSpec("finalize", deps=("verify",))])
    for round_ in range(1 if passes else 2):
        ledger.commit(ledger.claim("r", "w", key="draft"), output={"round": round_},
                      artifact=("report.md", DRAFT + f"round {round_}\n".encode()))
        v = ledger.claim("r", "w", key="verify")
        if passes:
            ledger.commit(v, output={"ok": True})
        else:
            ledger.commit(v, output={"ok": False, "feedback": "Missing required sections: Risks"}, repair=True)


@pytest.fixture
def failed(ledger_path, clock):
    with Ledger.open(ledger_path, clock=clock) as led:
        report_task(led, passes=False)
        assert led.task("r").status == "failed"
    return ledger_path


def test_a_draft_that_failed_verification_is_refused_and_nothing_written(failed, tmp_path, capsys):
    out = tmp_path / "report.md"
    assert warden(["export", "r", "--output", str(out), "--ledger", failed]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "failed verification by node verify" in err
    assert "Missing required sections: Risks" in err and "--unverified" in err
    assert not out.exists()
    assert warden(["export", "r", "--output", str(out), "--json", "--ledger", failed]) == 1
    assert "failed verification" in json.loads(capsys.readouterr().out)["error"]["message"]
    assert not out.exists()


def test_unverified_writes_it_marked_on_its_first_line(failed, tmp_path, capsys):
    out = tmp_path / "report.md"
    assert warden(["export", "r", "--output", str(out), "--unverified", "--json", "--ledger", failed]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["unverified"] is True and said["verification"]["status"] == "failed"
    first, blank, rest = out.read_bytes().split(b"\n", 2)
    assert first.startswith(b"UNVERIFIED DRAFT: report.md (node draft, attempt 2) failed verification by node "
                            b"verify") and blank == b""
    assert rest == DRAFT + b"round 1\n"  # the draft itself follows, byte for byte
    assert warden(["export", "r", "--output", str(tmp_path / "b.md"), "--unverified", "--ledger", failed]) == 0
    assert "UNVERIFIED" in capsys.readouterr().out


def test_the_report_marks_it_never_current(failed, capsys):
    assert warden(["report", "r", "--json", "--ledger", failed]) == 0
    best = json.loads(capsys.readouterr().out)["best_artifact"]
    assert best["current"] is False
    assert best["verification"]["status"] == "failed" and best["verification"]["by"] == "verify"
    assert warden(["report", "r", "--ledger", failed]) == 0
    text = capsys.readouterr().out
    assert "UNVERIFIED: failed verification by verify" in text


def test_a_verified_draft_exports_unchanged(ledger, ledger_path, tmp_path, capsys):
    report_task(ledger, passes=True)
    out = tmp_path / "report.md"
    assert warden(["export", "r", "--output", str(out), "--ledger", ledger_path]) == 0
    assert out.read_bytes() == DRAFT + b"round 0\n" and "UNVERIFIED" not in capsys.readouterr().out
    assert warden(["report", "r", "--json", "--ledger", ledger_path]) == 0
    best = json.loads(capsys.readouterr().out)["best_artifact"]
    assert best["verification"]["status"] == "passed" and best["current"] is True


def test_a_binary_draft_that_failed_cannot_be_marked_so_it_is_refused(ledger_path, clock, tmp_path, capsys):
    with Ledger.open(ledger_path, clock=clock) as led:
        led.create_task("r", max_repairs=0)
        led.add_nodes("r", [NodeSpec("draft"), NodeSpec("verify", deps=("draft",))])
        led.commit(led.claim("r", "w", key="draft"), output={}, artifact=("chart.png", b"\x89PNG\r\n\x1a\n\x00\xff"))
        led.commit(led.claim("r", "w", key="verify"), output={"ok": False}, repair=True)
    out = tmp_path / "chart.png"
    assert warden(["export", "r", "--output", str(out), "--unverified", "--ledger", ledger_path]) == 1
    assert "not text" in capsys.readouterr().err and not os.path.exists(out)
