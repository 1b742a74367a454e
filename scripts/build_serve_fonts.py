#!/usr/bin/env python3
"""Build the fallback fonts that `warden serve` ships with its page (console/serve/static/fonts/).

    python scripts/build_serve_fonts.py --noto-emoji PATH [--noto-symbols2 PATH] [--dejavu PATH] [--roboto PATH]

The browser terminal (textual-serve's xterm.js bundle) asks for the family 'Roboto Mono'. Warden
serves that family itself as one composite @font-face family (fonts.css, written here):

1. Roboto Mono, from textual-serve's own package (served from there, not copied): the text;
2. DejaVu Sans Mono, subset to the code points Roboto Mono lacks (arrows, ⊘ ○ ▶ ⚠ ✔ ✖, box
   drawing, blocks, math, Greek/Cyrillic extensions …);
3. Noto Sans Symbols 2, subset to the narrow (one-cell) symbols neither has (⏸ ⏹ ⏺ …), drawn as
   text rather than as emoji buttons;
4. Noto Emoji (monochrome), subset to the rest: ✋ 🔎 and every other emoji an agent may write.

The subsets have disjoint, exact ``unicode-range`` lists, so the browser picks the one face that
holds each character and never relies on a system font. Inputs (all free fonts):

* DejaVu Sans Mono: Debian's ``fonts-dejavu-core`` (/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf);
  licence: Bitstream Vera + public domain (copied to LICENSE-DejaVu.txt).
* Noto Sans Symbols 2: Debian's ``fonts-noto-core``
  (/usr/share/fonts/truetype/noto/NotoSansSymbols2-Regular.ttf); licence: SIL OFL 1.1
  (LICENSE-Noto.txt).
* Noto Emoji: the npm package ``@fontsource/noto-emoji`` (``npm pack @fontsource/noto-emoji``; the
  file ``files/noto-emoji-emoji-400-normal.woff2``); licence: SIL OFL 1.1 (LICENSE-Noto.txt).

Needs ``fonttools`` and ``brotli`` (WOFF2), both only for this script.
"""

from __future__ import annotations

import argparse
import sys
import unicodedata
from pathlib import Path

from fontTools import subset
from fontTools.ttLib import TTFont

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "console" / "serve" / "static" / "fonts"
DEJAVU = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"
SYMBOLS2 = "/usr/share/fonts/truetype/noto/NotoSansSymbols2-Regular.ttf"


def roboto_default() -> str:
    import textual_serve

    return str(Path(textual_serve.__file__).parent / "static" / "fonts" / "RobotoMono-VariableFont_wght.ttf")


def cmap(path: str) -> set[int]:
    return set(TTFont(path).getBestCmap())


def ranges(points: set[int]) -> str:
    """A CSS ``unicode-range`` value listing exactly ``points`` (runs collapsed)."""
    out: list[str] = []
    run: list[int] = []
    for p in sorted(points):
        if run and p == run[-1] + 1:
            run.append(p)
            continue
        if run:
            out.append(_run(run))
        run = [p]
    if run:
        out.append(_run(run))
    return ", ".join(out)


def _run(run: list[int]) -> str:
    return f"U+{run[0]:X}" if len(run) == 1 else f"U+{run[0]:X}-{run[-1]:X}"


FACE = """@font-face {{
  font-family: "Roboto Mono";
  src: url("/assets/fonts/{file}") format("woff2");
  font-weight: 100 700;
  font-style: {style};
  font-display: block;
  unicode-range: {ranges};
}}"""


def write_subset(src: str, points: set[int], dest: Path) -> None:
    opts = subset.Options()
    opts.flavor = "woff2"
    opts.layout_features = ["*"]
    opts.name_IDs = ["*"]  # keep the copyright and licence records
    opts.notdef_outline = True
    font = TTFont(src)
    sub = subset.Subsetter(opts)
    sub.populate(unicodes=sorted(points))
    sub.subset(font)
    font.flavor = "woff2"
    font.save(dest)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--noto-emoji", required=True, metavar="PATH")
    ap.add_argument("--noto-symbols2", default=SYMBOLS2, metavar="PATH")
    ap.add_argument("--dejavu", default=DEJAVU, metavar="PATH")
    ap.add_argument("--roboto", default=None, metavar="PATH")
    args = ap.parse_args()
    roboto = cmap(args.roboto or roboto_default())
    dejavu = cmap(args.dejavu) - roboto
    # Narrow symbols (one terminal cell: ⏸ ⏹ ⏺ …) as text glyphs from Noto Sans Symbols 2, not
    # as Noto Emoji's buttons; wide ones (two cells: ✋ 🔎 …) and the rest from Noto Emoji.
    symbols = {p for p in cmap(args.noto_symbols2) - roboto - dejavu
               if p > 0x7F and unicodedata.east_asian_width(chr(p)) not in "WF"}
    emoji = {p for p in cmap(args.noto_emoji) - roboto - dejavu - symbols
             if p > 0x7F and unicodedata.category(chr(p)) != "Cc"}
    OUT.mkdir(parents=True, exist_ok=True)
    write_subset(args.dejavu, dejavu, OUT / "dejavu-sans-mono-fallback.woff2")
    write_subset(args.noto_symbols2, symbols, OUT / "noto-symbols2-fallback.woff2")
    write_subset(args.noto_emoji, emoji, OUT / "noto-emoji-fallback.woff2")
    fallbacks = "\n".join(
        FACE.format(file=file, style=style, ranges=ranges(points))
        for file, points in (("dejavu-sans-mono-fallback.woff2", dejavu),
                             ("noto-symbols2-fallback.woff2", symbols), ("noto-emoji-fallback.woff2", emoji))
        for style in ("normal", "italic")
    )
    css = f"""/* Generated by scripts/build_serve_fonts.py; do not edit by hand.
   The browser terminal asks for 'Roboto Mono'; these faces make that one family. The last face
   declared is tried first, and the fallback subsets list exactly the code points they hold, so
   each character comes from the one face that has it. Every face has the same weight range
   (and each style its faces), as the browser only composes faces whose descriptors match. */
@font-face {{
  font-family: "Roboto Mono";
  src: url("/static/fonts/RobotoMono-VariableFont_wght.ttf") format("truetype");
  font-weight: 100 700;
  font-style: normal;
  font-display: block;
}}
@font-face {{
  font-family: "Roboto Mono";
  src: url("/static/fonts/RobotoMono-Italic-VariableFont_wght.ttf") format("truetype");
  font-weight: 100 700;
  font-style: italic;
  font-display: block;
}}
{fallbacks}
"""
    (OUT.parent / "fonts.css").write_text(css, encoding="utf-8")
    for f in sorted(OUT.glob("*.woff2")):
        print(f"{f.relative_to(ROOT)}: {f.stat().st_size} bytes")
    print(f"code points: DejaVu {len(dejavu)}, Noto Sans Symbols 2 {len(symbols)}, Noto Emoji {len(emoji)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
