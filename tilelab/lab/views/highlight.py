"""Syntax highlighting for the lab's listings: Python, Tile IR, PTX and SASS.

Why: the lab shows code side by side and links lines across panels, so it needs
highlighted HTML *per line* (one string per source line, spans balanced within the line)
rather than one opaque block. Pygments (installed with IPython) does the tokenizing; Tile
IR (an MLIR dialect) and SASS get small self-contained lexers here. Colours come from CSS
classes (:data:`CSS`) bound to JupyterLab's editor variables, so listings follow the light
and dark themes. Without pygments the lines are escaped plain text.

Example:
    >>> lines = highlight_lines("%1 = addf %a, %b : tile<256xf32>", "tileir")
    >>> 'class="tl-k"' in lines[0] and "addf" in lines[0]
    True
"""
from __future__ import annotations

import html
from typing import Any

__all__ = ["LANGUAGES", "highlight_lines", "tileir_lexer", "sass_lexer", "CSS"]

#: languages :func:`highlight_lines` knows (anything else is shown as plain text)
LANGUAGES = ("python", "tileir", "ptx", "sass", "text")

# Pygments token type -> our CSS class (the most specific match wins).
_CLASSES: tuple[tuple[str, str], ...] = (
    ("Comment", "tl-c"),
    ("Keyword", "tl-k"),
    ("Name.Function", "tl-f"),
    ("Name.Class", "tl-f"),
    ("Name.Builtin", "tl-b"),
    ("Name.Decorator", "tl-d"),
    ("Name.Variable", "tl-v"),
    ("Name.Attribute", "tl-a"),
    ("Name.Label", "tl-f"),
    ("Name.Tag", "tl-a"),
    ("Literal.String", "tl-s"),
    ("Literal.Number", "tl-n"),
    ("Operator.Word", "tl-k"),
    ("Operator", "tl-o"),
    ("Keyword.Type", "tl-t"),
    ("Generic.Error", "tl-e"),
    ("Error", "tl-e"),
)


def _tileir_lexer_class() -> Any:
    from pygments.lexer import RegexLexer, bygroups
    from pygments.token import (Comment, Keyword, Name, Number, Operator, Punctuation,
                                String, Text, Whitespace)

    class TileIRLexer(RegexLexer):
        """Tile IR text as ``tileirdisasm`` prints it (MLIR generic syntax)."""

        name = "Tile IR"
        aliases = ["tileir"]
        tokens = {
            "root": [
                (r"\s+", Whitespace),
                (r"//.*$", Comment.Single),
                (r'"(\\\\|\\"|[^"])*"', String),
                (r"(entry|func)(\s+)(@[\w.$]+)", bygroups(Keyword, Whitespace, Name.Function)),
                (r"@[\w.$]+", Name.Function),
                (r"%[\w.$#-]+", Name.Variable),
                (r"#[\w.$]+", Name.Attribute),
                (r"\^[\w.$]+", Name.Label),
                (r"\b(tile|ptr|token|tensor_view|partition_view|tile_view|strides|shape"
                 r"|padding_value|optimization_hints|loc|unknown)\b", Keyword.Type),
                (r"\b(\d+x)+[a-zA-Z]\w*", Keyword.Type),            # 256x128xf32
                (r"\b([iuf]\d+|bf16|tf32|f8E4M3FN|f8E5M2|index)\b", Keyword.Type),
                (r"\b(return|yield|continue|break|if|else|for|loop|in|to|step|iter_values"
                 r"|token|weak|relaxed|acquire|release)\b", Keyword),
                (r"\b[a-z][\w.]*(?=\s|$)", Keyword),  # op names: addf, load_view_tko, ...
                (r"-?\d+\.\d*(e[+-]?\d+)?", Number.Float),
                (r"-?0x[0-9a-fA-F]+", Number.Hex),
                (r"-?\d+", Number.Integer),
                (r"(->|=|:|\*)", Operator),
                (r"[\[\](){}<>,?]", Punctuation),
                (r"\w+", Text),
                (r".", Text),
            ]
        }

    return TileIRLexer


def _sass_lexer_class() -> Any:
    from pygments.lexer import RegexLexer
    from pygments.token import Comment, Keyword, Name, Number, Operator, Punctuation, Text

    class SassLexer(RegexLexer):
        """SASS as ``nvdisasm`` prints it: ``/*0010*/  IMAD R1, R2, c[0x0][0x28] ;``."""

        name = "SASS"
        aliases = ["sass"]
        tokens = {
            "root": [
                (r"//.*$", Comment.Single),
                (r"/\*[0-9a-fA-F]+\*/", Comment.Special),
                (r"/\*.*?\*/", Comment.Multiline),
                (r"^\s*\.[\w.]+", Name.Attribute),          # directives
                (r"^[\w.$]+:", Name.Label),
                (r"\.L_[\w]+", Name.Label),
                (r"@!?U?P[T\d]+", Keyword.Type),             # predicates
                (r"\b(U?R\d+|URZ|RZ|U?P\d|PT|SR_[\w.]+)\b", Name.Variable),
                (r"\bc\[0x[0-9a-f]+\]", Name.Builtin),
                (r"\b[A-Z][A-Z0-9_]*(\.[A-Z0-9_]+)*\b", Keyword),  # opcodes
                (r"-?0x[0-9a-fA-F]+", Number.Hex),
                (r"-?\d+(\.\d+)?", Number),
                (r"[|~!-]", Operator),
                (r"[\[\](),;{}]", Punctuation),
                (r"\s+", Text),
                (r".", Text),
            ]
        }

    return SassLexer


_lexer_cache: dict[str, Any] = {}


def tileir_lexer() -> Any:
    """A pygments lexer for Tile IR text (None without pygments).

    Example:
        >>> tileir_lexer().name
        'Tile IR'
    """
    return _lexer("tileir")


def sass_lexer() -> Any:
    """A pygments lexer for nvdisasm's SASS listing (None without pygments).

    Example:
        >>> sass_lexer().name
        'SASS'
    """
    return _lexer("sass")


def _lexer(language: str) -> Any:
    if language in _lexer_cache:
        return _lexer_cache[language]
    lexer = None
    try:
        if language == "tileir":
            lexer = _tileir_lexer_class()(stripnl=False, ensurenl=False)
        elif language == "sass":
            lexer = _sass_lexer_class()(stripnl=False, ensurenl=False)
        elif language in ("python", "ptx"):
            from pygments.lexers import get_lexer_by_name

            lexer = get_lexer_by_name(language, stripnl=False, ensurenl=False)
    except ImportError:  # pragma: no cover - pygments comes with IPython
        lexer = None
    _lexer_cache[language] = lexer
    return lexer


_class_cache: dict[Any, str | None] = {}


def _css_class(ttype: Any) -> str | None:
    """Our CSS class of a pygments token type: its most specific listed ancestor."""
    if ttype in _class_cache:
        return _class_cache[ttype]
    chain, t = set(), ttype
    while t is not None and len(t):
        chain.add(".".join(t))
        t = t.parent
    best, best_len = None, -1
    for name, cls in _CLASSES:
        depth = name.count(".")
        if name in chain and depth > best_len:
            best, best_len = cls, depth
    _class_cache[ttype] = best
    return best


def highlight_lines(text: str, language: str) -> list[str]:
    """``text`` as HTML, one string per line, each with balanced ``<span>`` tags.

    ``language`` is one of :data:`LANGUAGES`; unknown languages (and a missing pygments)
    give escaped plain text. The result has exactly ``len(text.splitlines())`` entries.

    Example:
        >>> highlight_lines("def f():\\n    return 1", "python")[1]
        '    <span class="tl-k">return</span> <span class="tl-n">1</span>'
    """
    raw_lines = text.splitlines()
    lexer = _lexer(language) if language in LANGUAGES else None
    if lexer is None:
        return [html.escape(line) for line in raw_lines]
    out: list[list[str]] = [[]]
    for ttype, value in lexer.get_tokens(text):
        cls = _css_class(ttype)
        pieces = value.split("\n")
        for i, piece in enumerate(pieces):
            if i:
                out.append([])
            if piece:
                esc = html.escape(piece)
                out[-1].append(f'<span class="{cls}">{esc}</span>' if cls else esc)
    lines = ["".join(parts) for parts in out]
    # pygments may add or drop a final empty line; keep one entry per input line
    lines = lines[:len(raw_lines)]
    lines += [html.escape(line) for line in raw_lines[len(lines):]]
    return lines


CSS = """
.tilelab-view .tl-c { color: var(--jp-mirror-editor-comment-color, var(--tl-fb-comment));
  font-style: italic; }
.tilelab-view .tl-k { color: var(--jp-mirror-editor-keyword-color, var(--tl-fb-keyword));
  font-weight: 600; }
.tilelab-view .tl-f { color: var(--jp-mirror-editor-def-color, var(--tl-fb-def)); }
.tilelab-view .tl-b { color: var(--jp-mirror-editor-builtin-color, var(--tl-fb-builtin)); }
.tilelab-view .tl-d { color: var(--jp-mirror-editor-meta-color, var(--tl-fb-meta)); }
.tilelab-view .tl-v { color: var(--jp-mirror-editor-variable-2-color, var(--tl-fb-variable)); }
.tilelab-view .tl-a { color: var(--jp-mirror-editor-attribute-color, var(--tl-fb-attribute)); }
.tilelab-view .tl-s { color: var(--jp-mirror-editor-string-color, var(--tl-fb-string)); }
.tilelab-view .tl-n { color: var(--jp-mirror-editor-number-color, var(--tl-fb-number)); }
.tilelab-view .tl-o { color: var(--jp-mirror-editor-operator-color, var(--tl-fb-operator)); }
.tilelab-view .tl-t { color: var(--jp-mirror-editor-variable-3-color, var(--tl-fb-type)); }
.tilelab-view .tl-e { color: var(--jp-error-color1, #d32f2f); }
.tilelab-view {
  --tl-fb-comment: #6a737d; --tl-fb-keyword: #8e24aa; --tl-fb-def: #1565c0;
  --tl-fb-builtin: #00838f; --tl-fb-meta: #ad1457; --tl-fb-variable: #37474f;
  --tl-fb-attribute: #6d4c41; --tl-fb-string: #2e7d32; --tl-fb-number: #00695c;
  --tl-fb-operator: #7b1fa2; --tl-fb-type: #ef6c00;
}
@media (prefers-color-scheme: dark) {
  .tilelab-view {
    --tl-fb-comment: #8b949e; --tl-fb-keyword: #d2a8ff; --tl-fb-def: #79c0ff;
    --tl-fb-builtin: #56d4dd; --tl-fb-meta: #ff7b72; --tl-fb-variable: #c9d1d9;
    --tl-fb-attribute: #ffa657; --tl-fb-string: #a5d6a7; --tl-fb-number: #80cbc4;
    --tl-fb-operator: #ce93d8; --tl-fb-type: #ffb74d;
  }
}
"""
"""Token colours: JupyterLab's editor theme variables, with fallbacks for light and dark
pages outside JupyterLab (nbconvert HTML, VS Code)."""
