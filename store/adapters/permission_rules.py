""""Always allow": the rules Claude Code suggests for a permission request, offered as options.

Claude Code's ``PermissionRequest`` hook input carries ``permission_suggestions``: the updates its own
prompt offers besides "Yes" (``addRules`` such as ``Bash(npm test:*)``, ``addDirectories``,
``setMode``), each with a ``destination`` (``session``, ``localSettings``, ``projectSettings``,
``userSettings``). Warden's permission handoff offers each as an option ``always-N`` beside allow
once and deny; the chosen one goes back as the decision's ``updatedPermissions`` (the suggestion
as Claude Code gave it), so Claude Code applies it as if its own prompt had been answered. The
rule and who granted it are the handoff's resolution (option, ``resolved_by``, ``resolved_at``)
with the rule kept in its context (``rules``): :func:`rules_for` lists what was granted per task and
session. Codex validates its hook answers strictly and refuses ``updatedPermissions`` in the shape
Claude Code takes, so only Claude Code is offered rules.

For an edit (``Edit``, ``MultiEdit``, ``Write``) the handoff's context also carries the change as a
unified diff (``diff``) and its file (``file``), so a person sees what they allow.
"""

from __future__ import annotations

import difflib
import json

from store.facade import Ledger
from store.jsontypes import JsonArray, JsonMapping, JsonObject, JsonValue

PREFIX = "always-"
MAX_RULES = 6  # suggestions offered at most
RULE_CAP = 2000  # bytes of one suggestion's JSON kept (a larger one is not offered)
DIFF_CAP = 60_000  # characters of an edit's diff kept
DEST = {"session": "this session", "localSettings": "this project, for you", "projectSettings": "this project",
        "userSettings": "every project", "cliArg": "this run"}


def _rule_text(r: JsonValue) -> str:
    if not isinstance(r, dict):
        return str(r)
    tool, content = str(r.get("toolName") or "?"), r.get("ruleContent")
    return f"{tool}({content})" if content else tool


def describe(s: JsonMapping) -> str:
    """One suggestion in words: ``allow Bash(npm test:*) — this session``."""
    kind = s.get("type")
    dest = DEST.get(str(s.get("destination")), str(s.get("destination") or "?"))
    raw_rules, raw_dirs = s.get("rules"), s.get("directories")
    rules: JsonArray = raw_rules if isinstance(raw_rules, list) else []
    dirs: JsonArray = raw_dirs if isinstance(raw_dirs, list) else []
    if kind in ("addRules", "replaceRules"):
        what = f"{s.get('behavior') or 'allow'} {', '.join(_rule_text(r) for r in rules) or '?'}"
    elif kind == "removeRules":
        what = f"remove the rule {', '.join(_rule_text(r) for r in rules) or '?'}"
    elif kind == "addDirectories":
        what = f"allow access to {', '.join(str(d) for d in dirs) or '?'}"
    elif kind == "setMode":
        what = f"switch to {s.get('mode')} mode"
    else:
        what = str(kind)
    return f"{what} — {dest}"


def offer(options: list[JsonObject], context: JsonObject, payload: JsonMapping, *, client: str) -> None:
    """Add the client's suggested rules to a permission handoff's options (and the rules, the
    edit's diff and file to its context), in place."""
    tool, tool_input = payload.get("tool_name"), payload.get("tool_input")
    if isinstance(tool_input, dict):
        diff = edit_diff(str(tool), tool_input)
        if diff is not None:
            context["diff"] = diff
            context["file"] = str(tool_input.get("file_path") or tool_input.get("notebook_path") or "")[:500]
    suggestions = payload.get("permission_suggestions")
    if client != "claude" or not isinstance(suggestions, list):
        return
    rules: JsonArray = []
    for s in suggestions:
        if len(rules) >= MAX_RULES or not isinstance(s, dict) or not isinstance(s.get("type"), str):
            continue
        if len(json.dumps(s)) > RULE_CAP:
            continue
        option = f"{PREFIX}{len(rules) + 1}"
        text = describe(s)
        rules.append({"option": option, "rule": s, "text": text})
        options.append({"id": option, "label": f"Always: {text}"[:300],
                        "consequence": "it runs, and Claude Code keeps this rule: requests it covers are not asked again"})
    if rules:
        context["rules"] = rules


def granted(option: object, context: JsonMapping | None) -> JsonArray | None:
    """The ``updatedPermissions`` an answer gives back: the chosen suggestion, or None (allow once)."""
    if not isinstance(option, str) or not option.startswith(PREFIX) or not context:
        return None
    rules = context.get("rules")
    for r in rules if isinstance(rules, list) else []:
        if isinstance(r, dict) and r.get("option") == option and isinstance(r.get("rule"), dict):
            return [r["rule"]]
    return None


def is_rule(option: object) -> bool:
    return isinstance(option, str) and option.startswith(PREFIX)


def rules_for(ledger: Ledger, task_id: str) -> list[JsonObject]:
    """The rules granted in a task's permission handoffs, oldest first: the rule, its words, the
    session, who granted it and when (the handoff's resolution)."""
    out: list[JsonObject] = []
    for h in ledger.handoffs(status="resolved", task_id=task_id):
        if h.kind != "permission" or not is_rule(h.resolution_option):
            continue
        rule = granted(h.resolution_option, h.context)
        words = next((str(r.get("text")) for r in (h.context or {}).get("rules") or []
                      if isinstance(r, dict) and r.get("option") == h.resolution_option), "?")
        out.append({"handoff": h.id, "rule": rule[0] if rule else None, "text": words,
                    "session": (h.context or {}).get("session"), "tool": (h.context or {}).get("tool"),
                    "by": h.resolved_by, "at": h.resolved_at})
    return out


def edit_diff(tool: str, tool_input: JsonMapping) -> str | None:
    """An edit's change as a unified diff (the old text as the tool input gives it), or None."""
    path = str(tool_input.get("file_path") or "file")
    pairs: list[tuple[str, str]] = []
    if tool == "Edit":
        pairs.append((str(tool_input.get("old_string") or ""), str(tool_input.get("new_string") or "")))
    elif tool == "MultiEdit" and isinstance(tool_input.get("edits"), list):
        for e in tool_input["edits"][:50]:
            if isinstance(e, dict):
                pairs.append((str(e.get("old_string") or ""), str(e.get("new_string") or "")))
    elif tool == "Write":
        pairs.append(("", str(tool_input.get("content") or "")))
    else:
        return None
    lines: list[str] = []
    for old, new in pairs:
        lines.extend(difflib.unified_diff(old.splitlines(), new.splitlines(), f"a/{path}", f"b/{path}", lineterm="", n=2))
    text = "\n".join(lines)
    return text if len(text) <= DIFF_CAP else text[:DIFF_CAP] + "\n… (cut)"


__all__ = ["offer", "granted", "is_rule", "rules_for", "describe", "edit_diff", "PREFIX"]
