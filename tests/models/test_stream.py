"""Streaming: incremental detokenization and the engine's token streams.

The acceptance test: the text streamed piece by piece equals the final text, on every
prefix of a token sequence whose characters span several byte-level tokens (accents,
CJK, an emoji), for a SentencePiece-style decoder that merges pieces, and for the
engine's streams (with and without a stop string).
"""
from __future__ import annotations

import pytest

from tilelab.models import Qwen3
from tilelab.models.stream import REPLACEMENT, TextDecoder

from .chat_checkpoints import EOS_MESSAGES, chat_checkpoint  # noqa: F401 (fixture)

TEXT = "Grüße aus Köln, 世界 🚀 and a tile kernel — ok"


def _byte_level(tmp_path):
    from tests.models.checkpoints import _write_tokenizer
    from tokenizers import Tokenizer

    _write_tokenizer(tmp_path, 300)
    return Tokenizer.from_file(str(tmp_path / "tokenizer.json"))


def _metaspace():
    """A SentencePiece-style tokenizer: words as pieces with a leading '▁', merged by
    the decoder (so a token's text depends on its neighbours)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    words = ["▁the", "▁quick", "▁brown", "▁fox", "the", "▁", "qu", "ick", "<unk>"]
    tok = Tokenizer(models.WordPiece({w: i for i, w in enumerate(words)},
                                     unk_token="<unk>", continuing_subword_prefix=""))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    return tok


def _stream(tokenizer, ids):
    d = TextDecoder(tokenizer)
    pieces = [d.push(t) for t in ids]
    return pieces, d.flush(), d


def test_multi_byte_characters_are_held_until_complete(tmp_path):
    tok = _byte_level(tmp_path)
    ids = tok.encode(TEXT).ids
    assert len(ids) > len(TEXT.split())             # characters span several tokens
    for n in range(1, len(ids) + 1):
        pieces, tail, d = _stream(tok, ids[:n])
        assert "".join(pieces) + tail == d.text == tok.decode(ids[:n])
    pieces, tail, _ = _stream(tok, ids)
    assert tail == "" and not any(REPLACEMENT in p for p in pieces)
    assert "🚀" in pieces and "".join(pieces) == TEXT
    assert pieces.count("") > 0                     # held back at least once


def test_an_incomplete_character_at_the_end_is_flushed(tmp_path):
    tok = _byte_level(tmp_path)
    ids = tok.encode("ab 🚀").ids
    pieces, tail, d = _stream(tok, ids[:-1])        # the emoji cut short
    assert REPLACEMENT not in "".join(pieces)
    assert tail.endswith(REPLACEMENT) and d.text == tok.decode(ids[:-1])


def test_pieces_that_merge_decode_in_context():
    tok = _metaspace()
    ids = tok.encode("the quick brown fox").ids
    pieces, tail, d = _stream(tok, ids)
    assert pieces[0] == "the" and pieces[1] == " quick"
    assert "".join(pieces) + tail == tok.decode(ids) == "the quick brown fox"


def test_special_tokens_are_left_out(chat_checkpoint):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(chat_checkpoint / "tokenizer.json"))
    ids = tok.encode("<|im_start|>user\nhi<|im_end|>").ids
    pieces, tail, d = _stream(tok, ids)
    assert d.text == "user\nhi" == tok.decode(ids, skip_special_tokens=True)


@pytest.fixture(scope="module")
def engine(chat_checkpoint):
    return Qwen3.from_pretrained(chat_checkpoint, device="cpu", max_seq_len=96)


def test_the_engines_streamed_text_is_its_final_text(engine):
    ids = engine.encode("hello world from tilelab")
    s = engine.stream(ids, 10, ignore_eos=True)
    pieces = list(s)
    assert [p.token for p in pieces] == s.tokens == engine.generate(ids, 10, ignore_eos=True)
    assert "".join(p.text for p in pieces) == s.text == engine.decode(s.tokens)
    stop = s.text[3:5]
    t = engine.stream(ids, 10, ignore_eos=True, stop_strings=[stop])
    assert "".join(p.text for p in t) == t.text == s.text[:s.text.index(stop)]


def test_chat_stream_pieces_arrive_as_tokens_come(engine):
    s = engine.chat(EOS_MESSAGES, enable_thinking=False, stream=True, max_new_tokens=12)
    seen = []
    for piece in s:
        seen.append(piece.token)
        assert s.tokens == seen                     # one token per read-back
    assert s.finish_reason == "eos"


def test_a_closed_stream_leaves_what_ran_in_the_cache(engine):
    ids = engine.encode("hello world from tilelab")
    s = engine.stream(ids, 10, ignore_eos=True)
    first = [next(s).token for _ in range(3)]
    s.close()
    assert engine.cache_state.tokens == ids + first[:2]   # positions processed by 2 steps


def test_doctests():
    import doctest

    import tilelab.models.stream

    assert doctest.testmod(tilelab.models.stream).failed == 0
