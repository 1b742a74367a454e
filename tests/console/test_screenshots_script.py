"""scripts/screenshots.py writes pictures a README reader sees as the terminal showed them:
spaces kept (librsvg drops a ``<text>``'s leading ``&#160;`` unless ``xml:space="preserve"``: words
ran together, "no_new_infoalarm", "^ppalette") and a font stack that has ``✋`` (it was tofu)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("screenshots_script", ROOT / "scripts" / "screenshots.py")
shots = importlib.util.module_from_spec(spec)
spec.loader.exec_module(shots)


def test_readable_svg_keeps_spaces_and_names_fonts_with_every_glyph():
    raw = ('<svg class="rich-terminal" viewBox="0 0 10 10" xmlns="http://www.w3.org/2000/svg"><style>'
           '.x { font-family: Fira Code, monospace; }</style>'
           '<text x="1" y="1">&#160;&#160;alarm</text></svg>')
    out = shots.readable_svg(raw)
    assert out.startswith('<svg xml:space="preserve" class="rich-terminal"')
    assert "font-family: Fira Code, monospace;" not in out
    assert '"Noto Emoji"' in out and '"DejaVu Sans Mono"' in out
    assert shots.readable_svg(out) == out  # once is enough


def test_every_committed_screenshot_is_readable():
    svgs = sorted((ROOT / "screenshots").glob("*.svg"))
    assert svgs
    for svg in svgs:
        text = svg.read_text(encoding="utf-8")
        assert 'xml:space="preserve"' in text.split(">", 1)[0], svg.name
        assert shots.FONT_STACK in text, svg.name
        assert svg.with_suffix(".png").exists(), svg.name


def test_the_served_fonts_become_truetype_for_rsvg(tmp_path):
    pytest.importorskip("fontTools")
    pytest.importorskip("brotli")
    from fontTools.ttLib import TTFont

    shots.served_fonts(tmp_path)
    held = set()
    for ttf in tmp_path.glob("*.ttf"):
        font = TTFont(str(ttf))
        assert font.flavor is None  # plain TrueType: librsvg's cairo draws tofu from WOFF2
        held |= set(font.getBestCmap())
    assert {ord("✋"), ord("⏸")} <= held
    names = {re.sub(r"\s+", " ", TTFont(str(t))["name"].getDebugName(1)) for t in tmp_path.glob("*.ttf")}
    for family in ("Noto Emoji", "Noto Sans Symbols2"):
        assert family in names and f'"{family}"' in shots.FONT_STACK
