"""The served page's fonts cover every character the console draws, from files Warden serves.

The browser terminal asks for 'Roboto Mono'; fonts.css makes that one composite family: Roboto Mono
(from textual-serve's package) plus fallback subsets whose ``unicode-range`` lists exactly the code
points each holds. So a character is covered when some face's range includes it *and* that face's
file has it; a face whose range claimed a character it lacks would draw tofu.
"""

from __future__ import annotations

import html
import re
import unicodedata
from pathlib import Path

import pytest

pytest.importorskip("fontTools", reason="the font checks need fonttools (pip install 'warden[test]')")
pytest.importorskip("brotli", reason="reading WOFF2 needs brotli (pip install 'warden[test]')")
pytest.importorskip("textual_serve", reason="warden serve needs the serve extra: pip install 'warden[serve]'")

from fontTools.ttLib import TTFont  # noqa: E402

import console  # noqa: E402
from console.glyphs import NODE_GLYPHS, SIGNAL_GLYPH, TASK_GLYPHS  # noqa: E402
from console.serve.server import STATIC, TEXTUAL_SERVE_FILES, TEXTUAL_SERVE_STATIC  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FACE = re.compile(r"@font-face\s*{(.*?)}", re.S)


def faces() -> list[dict[str, str]]:
    css = (STATIC / "fonts.css").read_text(encoding="utf-8")
    out = []
    for body in FACE.findall(css):
        decl = dict((k.strip(), v.strip()) for k, v in (d.split(":", 1) for d in body.split(";") if ":" in d))
        out.append(decl)
    return out


def face_file(face: dict[str, str]) -> Path:
    url = re.search(r'url\("([^"]+)"\)', face["src"])[1]
    if url.startswith("/static/"):
        rel = url.removeprefix("/static/")
        assert rel in TEXTUAL_SERVE_FILES, url  # a file the server serves
        return TEXTUAL_SERVE_STATIC / rel
    assert url.startswith("/assets/"), url
    return STATIC / url.removeprefix("/assets/")


def parse_range(value: str | None) -> set[int] | None:
    if value is None:
        return None
    points: set[int] = set()
    for part in value.split(","):
        a, _, b = part.strip().removeprefix("U+").partition("-")
        points.update(range(int(a, 16), int(b or a, 16) + 1))
    return points


def cmap(path: Path) -> set[int]:
    return set(TTFont(str(path)).getBestCmap())


def console_characters() -> set[str]:
    """Every non-ASCII character in the console's code and styles, and in every picture of it."""
    chars: set[str] = set("".join(NODE_GLYPHS.values()) + "".join(TASK_GLYPHS.values()) + SIGNAL_GLYPH)
    root = Path(console.__file__).parent
    sources = [p for p in root.rglob("*") if p.suffix in (".py", ".tcss") and "serve" not in p.parts]
    pictures = list((ROOT / "screenshots").glob("*.svg")) + list((ROOT / "tests").rglob("__snapshots__/**/*.svg"))
    for p in sources + pictures:
        text = p.read_text(encoding="utf-8")
        if p.suffix == ".svg":
            text = html.unescape(text)
        chars.update(c for c in text if ord(c) > 0x7E)
    # Textual's own widgets the console uses: borders, scrollbars, footer, command palette, toasts
    chars.update("─│┌┐└┘├┤┬┴┼╭╮╯╰━┃┏┓┗┛═║╔╗╚╝▁▂▃▄▅▆▇█▉▊▋▌▍▎▏▐▔▕▀░▒▓•●○◉◯▲▼◀▶▸▾⏎⌫↑↓←→🔎✓✗…")
    return {c for c in chars if unicodedata.category(c) not in ("Cc", "Cf", "Zs", "Mn", "Co", "Cs")}


def test_every_console_character_has_a_face_that_holds_it() -> None:
    loaded = [(parse_range(f.get("unicode-range")), cmap(face_file(f)), f.get("font-style", "normal")) for f in faces()]
    needed = console_characters()
    assert {"✋", "⏸", "🔎", "⚠", "✔", "✖", "⊘", "○", "▶", "█", "▁"} <= needed
    for style in ("normal", "italic"):
        group = [(r, c) for r, c, s in loaded if s == style]
        missing = []
        for ch in sorted(needed):
            p = ord(ch)
            # the browser tries the last declared face first, so the first claimant from the end decides
            claim = next(((r, c) for r, c in reversed(group) if r is None or p in r), None)
            if claim is None or p not in claim[1]:
                missing.append(f"U+{p:04X} {ch} {unicodedata.name(ch, '?')}")
        assert not missing, f"{style}: no served face draws: " + ", ".join(missing)


def test_fallback_ranges_are_exactly_what_their_files_hold() -> None:
    ranged = [(parse_range(f["unicode-range"]), cmap(face_file(f)), f["src"]) for f in faces() if "unicode-range" in f]
    assert len(ranged) >= 4
    for points, held, src in ranged:
        assert points == held, src
    roboto = cmap(TEXTUAL_SERVE_STATIC / "fonts/RobotoMono-VariableFont_wght.ttf")
    normal = [p for p, _, src in ranged][::2]
    for i, a in enumerate(normal):
        assert not a & roboto  # Roboto Mono draws what it has; fallbacks only what it lacks
        for b in normal[i + 1:]:
            assert not a & b


def test_every_face_has_the_same_descriptors_and_a_licence() -> None:
    """Chromium composes only faces whose weight and style match; a mismatch silently drops one."""
    fs = faces()
    assert {f["font-family"] for f in fs} == {'"Roboto Mono"'}
    assert {f["font-weight"] for f in fs} == {"100 700"}
    for style in ("normal", "italic"):
        assert sum(f["font-style"] == style for f in fs) == len(fs) // 2
    for f in fs:
        path = face_file(f)
        assert path.is_file() and path.stat().st_size > 1000
    licences = {p.name for p in (STATIC / "fonts").glob("LICENSE-*.txt")}
    assert licences == {"LICENSE-DejaVu.txt", "LICENSE-Noto.txt"}
    assert "Open Font License" in (STATIC / "fonts" / "LICENSE-Noto.txt").read_text()
    assert "Bitstream" in (STATIC / "fonts" / "LICENSE-DejaVu.txt").read_text()
