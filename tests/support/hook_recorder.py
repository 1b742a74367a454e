"""A hook command that records what a real client sends and answers what the test says: how the
per-event behaviour of Claude Code and Codex is measured (docs/agents.md's table).

    python tests/support/hook_recorder.py DIR

appends the event's JSON (with the hook's pid) to ``DIR/events.jsonl``, then answers from
``DIR/answers.json`` (``{"PreToolUse": {...}, ...}``: the object printed on stdout; ``{"exit": 2,
"stderr": "..."}`` exits 2 with that text instead). ``{"wait": true}`` makes the hook wait until
the file ``DIR/go-<event>`` exists (a permission a person has not answered yet) and then answer
``{"then": {...}}``; its pid is recorded first so a test can kill it.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> int:
    where = sys.argv[1]
    raw = sys.stdin.buffer.read()
    try:
        event = json.loads(raw)
    except ValueError:
        event = {"unparsed": raw.decode("utf-8", "replace")}
    name = str(event.get("hook_event_name"))
    with open(os.path.join(where, "events.jsonl"), "a", encoding="utf-8") as f:
        f.write(json.dumps({"pid": os.getpid(), "at": time.time(), **event}) + "\n")
    try:
        with open(os.path.join(where, "answers.json"), encoding="utf-8") as f:
            answers = json.load(f)
    except (OSError, ValueError):
        answers = {}
    answer = answers.get(name)
    if isinstance(answer, dict) and answer.get("wait"):
        gate = os.path.join(where, f"go-{name}")
        while not os.path.exists(gate):  # a file the test makes: no other wake-up crosses processes
            time.sleep(0.05)
        answer = answer.get("then")
    if isinstance(answer, dict) and "exit" in answer:
        sys.stderr.write(str(answer.get("stderr", "")))
        return int(answer["exit"])
    if answer is not None:
        sys.stdout.write(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
