"""Every place the console hands text to Textual, read from the code (AST), is proved safe for agent
text: Textual parses a plain ``str`` as markup in ``Button`` labels, ``notify`` (unless
``markup=False``), ``Static``/``Label`` (unless ``markup=False``), option prompts and the command
palette — so each such argument must be a constant, a ``Text``/``Content`` (``literal(...)``), or
go with ``markup=False``; and text that reaches a one-line surface (a notification, a title, a
label, a placeholder) must be made safe (``safe_line``/``safe``/``literal``) or be a constant.

The dynamic half — hostile text driven through every surface in a real terminal — is
test_hostile_console_pty.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CONSOLE = Path(__file__).resolve().parents[2] / "console"
FILES = sorted(p for p in CONSOLE.rglob("*.py"))
SAFE_CALLS = {"safe_line", "safe", "literal", "Text", "Content", "assemble", "from_rich_text"}
SANITISERS = {"safe_line", "safe", "literal"}
NUMERIC_CALLS = {"len", "int", "round", "plural", "iso", "age_label", "duration_label", "eta_label"}


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


class Module:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.tree = ast.parse(path.read_text(encoding="utf-8"))
        # functions and methods in this module whose return annotation says Text or Content
        self.renderers = {
            f.name for f in ast.walk(self.tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
            and f.returns is not None and any(w in ast.unparse(f.returns) for w in ("Text", "Content"))
        }
        self.constants = {
            t.id for n in ast.walk(self.tree) if isinstance(n, ast.Assign) for t in n.targets
            if isinstance(t, ast.Name) and t.id.isupper() and isinstance(n.value, ast.Constant)
        }

    def where(self, node: ast.AST) -> str:
        return f"{self.path.relative_to(CONSOLE.parent)}:{getattr(node, 'lineno', '?')}"


RENDERERS: set[str] = set()
for _p in FILES:
    RENDERERS |= Module(_p).renderers


def literal_str(node: ast.expr | None) -> bool:
    """A constant (or a choice between constants): nothing from outside in it."""
    if node is None:
        return True
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.IfExp):
        return literal_str(node.body) and literal_str(node.orelse)
    if isinstance(node, ast.Name) and node.id.isupper():  # a module constant, by the house's convention
        return True
    return False


def markup_safe(node: ast.expr | None) -> bool:
    """Never parsed as markup: a constant, or a Text/Content (directly or from a renderer)."""
    if literal_str(node):
        return True
    if isinstance(node, ast.IfExp):
        return markup_safe(node.body) and markup_safe(node.orelse)
    if isinstance(node, ast.Call):
        n = _name(node.func)
        if n in ("Text", "Content", "literal", "assemble", "from_rich_text") or n in RENDERERS:
            return True
        if n == "cast" and len(node.args) == 2:
            return markup_safe(node.args[1])
    return False


def text_safe(node: ast.expr | None) -> bool:
    """Made safe for a one-line surface: a constant, a sanitiser's result, or an f-string / sum
    whose every part is one of those (or a number)."""
    if literal_str(node):
        return True
    if isinstance(node, ast.Call):
        n = _name(node.func)
        if n in SANITISERS or n in NUMERIC_CALLS or n in RENDERERS:
            return True
        if n in ("Text", "Content"):
            return not node.args or text_safe(node.args[0])
        if n == "get" and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
                and node.func.value.id.isupper():
            return all(text_safe(a) for a in node.args[1:])  # CONSTANT_TABLE.get(k, default)
        return n == "cast" and len(node.args) == 2 and text_safe(node.args[1])
    if isinstance(node, ast.JoinedStr):
        return all(isinstance(v, ast.Constant) or text_safe(v.value) or _numeric(v.value) for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return text_safe(node.left) and text_safe(node.right)
    if isinstance(node, ast.IfExp):
        return text_safe(node.body) and text_safe(node.orelse)
    return False


def _numeric(node: ast.expr) -> bool:
    if isinstance(node, ast.Call) and _name(node.func) in NUMERIC_CALLS:
        return True
    # counters and ids the store makes (ints): action ids, revisions, counts
    return isinstance(node, ast.Attribute) and node.attr in ("action_id", "revision", "revision_after", "remaining",
                                                              "attempt", "size", "id")


def _kw(call: ast.Call, name: str) -> ast.keyword | None:
    return next((k for k in call.keywords if k.arg == name), None)


def _markup_off(call: ast.Call) -> bool:
    k = _kw(call, "markup")
    return k is not None and isinstance(k.value, ast.Constant) and k.value.value is False


def _first(call: ast.Call, *names: str) -> ast.expr | None:
    if call.args:
        return call.args[0]
    for n in names:
        k = _kw(call, n)
        if k is not None:
            return k.value
    return None


def _element_prompt_safe(node: ast.expr) -> bool:
    """An options argument: a list/tuple/comprehension of prompts (or (prompt, value) tuples), or
    a renderer's result."""
    if isinstance(node, (ast.List, ast.Tuple)):
        return all(_element_prompt_safe(e) if isinstance(e, (ast.List, ast.Tuple)) and isinstance(node, ast.List)
                   else markup_safe(e) for e in (node.elts if isinstance(node, ast.List) else node.elts[:1]))
    if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
        elt = node.elt
        return markup_safe(elt.elts[0]) if isinstance(elt, ast.Tuple) else markup_safe(elt)
    if isinstance(node, ast.Call):
        if _name(node.func) in ("Option", "Selection"):
            return True  # checked where it is built
        return markup_safe(node) or _name(node.func) in RENDERERS or _returns_content(node)
    return False


def _returns_content(call: ast.Call) -> bool:
    n = _name(call.func)
    for p in FILES:
        for f in ast.walk(Module(p).tree):
            if isinstance(f, ast.FunctionDef) and f.name == n and f.returns is not None:
                return "Content" in ast.unparse(f.returns) or "Text" in ast.unparse(f.returns)
    return False


def violations(mod: Module) -> list[str]:
    out: list[str] = []
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Call):
            n = _name(node.func)
            if n in ("Static", "Label"):
                if not (_markup_off(node) or markup_safe(_first(node, "content", "renderable"))):
                    out.append(f"{mod.where(node)} {n}(...) without markup=False and with text that may be markup")
            elif n == "Button":
                if not markup_safe(_first(node, "label")):
                    out.append(f"{mod.where(node)} Button label is a str Textual parses as markup")
            elif n == "notify" and isinstance(node.func, ast.Attribute):
                msg = _first(node, "message")
                if not (literal_str(msg) or (_markup_off(node) and text_safe(msg))):
                    out.append(f"{mod.where(node)} notify(...) of text that is not constant: needs markup=False "
                               "and safe_line")
                title = _kw(node, "title")
                if title is not None and not text_safe(title.value):
                    out.append(f"{mod.where(node)} notify title not made safe")
            elif n in ("Option", "Selection"):
                if not markup_safe(_first(node, "prompt")):
                    out.append(f"{mod.where(node)} {n} prompt is a str Textual parses as markup")
            elif n in ("set_options", "add_option", "add_options") and node.args:
                if not _element_prompt_safe(node.args[0]):
                    out.append(f"{mod.where(node)} {n}(...) prompts may be parsed as markup")
            elif n in ("Hit", "DiscoveryHit"):
                display = node.args[1] if n == "Hit" and len(node.args) > 1 else _first(node, "display")
                if not markup_safe(display):
                    out.append(f"{mod.where(node)} {n} display is parsed as markup")
                help_kw = _kw(node, "help")
                if help_kw is not None and not markup_safe(help_kw.value):
                    out.append(f"{mod.where(node)} {n} help is parsed as markup")
            for k in node.keywords:
                if k.arg in ("placeholder", "tooltip", "border_title", "border_subtitle") \
                        and not text_safe(k.value):
                    out.append(f"{mod.where(node)} {k.arg}= not made safe")
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Attribute) and t.attr == "label" and not markup_safe(node.value):
                    out.append(f"{mod.where(node)} .label = a str Textual parses as markup")
                if isinstance(t, ast.Attribute) and t.attr in ("title", "sub_title", "border_title",
                                                                "border_subtitle", "placeholder", "tooltip",
                                                                "header") and not text_safe(node.value):
                    out.append(f"{mod.where(node)} .{t.attr} = text not made safe")
    return out


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(CONSOLE.parent)))
def test_every_display_call_site_is_safe(path: Path) -> None:
    bad = violations(Module(path))
    assert not bad, "\n".join(bad)


def test_the_checker_catches_what_it_must() -> None:
    """A test that cannot fail is a defect: the checker flags the round-1 crash and its cousins."""
    src = '''
def f(app, btn, h, o, w):
    btn.label = f"Resolve: {safe_line(o)}"
    app.notify(f"resolved {h.reason}")
    app.notify(safe_line(h.reason))
    yield Button(h.label)
    yield Static(h.question)
    yield Option(safe_line(o))
    yield Hit(1, o, None, help=h.title)
    w.placeholder = h.title
    self.title = h.title
'''
    p = CONSOLE / "_probe.py"
    mod = Module.__new__(Module)
    mod.path, mod.tree = p, ast.parse(src)
    mod.renderers, mod.constants = set(), set()
    found = violations(mod)
    assert len(found) == 10, found  # the label, both notifies, Button, Static, Option, Hit twice, 2 titles


def test_the_walk_sees_the_console() -> None:
    calls = sum(1 for p in FILES for n in ast.walk(Module(p).tree) if isinstance(n, ast.Call)
                and _name(n.func) in ("Static", "Button", "notify", "Option", "Label", "Hit", "DiscoveryHit"))
    assert calls >= 40, calls
