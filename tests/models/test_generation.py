"""Stopping: EOS ids from the checkpoint's files, stop strings, ``ignore_eos``, the token
budget; the read-back that decides it; against transformers' ``generate``.

The acceptance test: on a chat checkpoint written by transformers whose greedy reply
ends with ``<|im_end|>`` after a few tokens (tests/models/chat_checkpoints.py), the
engine's greedy tokens are exactly transformers' ``generate(do_sample=False)`` with the
checkpoint's own generation config, EOS token included, and nothing after it. Every
reference step up to the EOS is checked to be clear of a near tie first, so the
equality is required, not lucky.
"""
from __future__ import annotations

import numpy as np
import pytest

from tilelab.models import Qwen3
from tilelab.models.errors import GenerateInputError
from tilelab.models.generation import Piece
from tilelab.models.stopping import Stop, Stopper, stop_rules

from .chat_checkpoints import IM_END, chat_checkpoint, eos_prompt  # noqa: F401 (fixture)
from .qwen3_reference import hf_model, logits_tolerance, near_tie_step

PROMPT = [3, 17, 101, 250, 7, 42, 199]


@pytest.fixture(scope="module")
def chat_engine(chat_checkpoint):
    return Qwen3.from_pretrained(chat_checkpoint, device="cpu", max_seq_len=96)


@pytest.fixture(scope="module")
def plain(qwen3_checkpoint_factory):
    """A checkpoint without EOS ids (and its engine)."""
    path = qwen3_checkpoint_factory(initializer_range=0.1, tokenizer=True)
    return path, Qwen3.from_pretrained(path, device="cpu", max_seq_len=48)


def _hf_generate(path, ids, n, **kwargs):
    import torch

    with torch.no_grad():
        out = hf_model(str(path)).generate(torch.tensor([ids]), max_new_tokens=n,
                                           do_sample=False, output_logits=True,
                                           return_dict_in_generate=True, **kwargs)
    return out.sequences[0, len(ids):].tolist(), [lg[0].numpy() for lg in out.logits]


# ---------------------------------------------------------------- against transformers

def test_eos_stopping_is_transformers_generate(chat_checkpoint, chat_engine):
    ids = eos_prompt(chat_checkpoint)
    ref, logits = _hf_generate(chat_checkpoint, ids, 12)   # the checkpoint's config
    assert ref[-1] == IM_END and 2 <= len(ref) < 12, ref   # stopped early, at <|im_end|>
    gap = 2 * logits_tolerance(logits[0])[0]
    assert near_tie_step(logits, gap) == len(logits)       # no step is a near tie
    assert chat_engine.eos_token_ids == (IM_END, 0)
    assert chat_engine.generate(ids, 12) == ref
    s = chat_engine.stream(ids, 12)
    assert [p.token for p in s] == ref and s.finish_reason == "eos"
    assert s.speed.decode_steps == len(ref) - 1              # no step past the EOS


def test_eos_ids_given_to_both_stop_both_at_the_same_token(plain):
    """EOS ids the greedy path reaches, passed to transformers and to the engine: the
    same tokens, the EOS last; each of two ids stops where it first appears."""
    path, model = plain
    free, logits = _hf_generate(path, PROMPT, 8, eos_token_id=None, pad_token_id=0)
    gap = 2 * logits_tolerance(logits[0])[0]
    clear = near_tie_step(logits, gap)
    assert clear >= 2, "the reference path has a near tie too early to test on"
    assert model.generate(PROMPT, 8)[:clear] == free[:clear]   # no EOS ids: all 8
    eos = free[clear - 1]
    first = free.index(eos)
    ref, _ = _hf_generate(path, PROMPT, 8, eos_token_id=[eos, 299], pad_token_id=0)
    assert ref == free[:first + 1]
    assert model.generate(PROMPT, 8, eos_token_ids=[eos, 299]) == ref


def test_ignore_eos_runs_to_the_budget(chat_checkpoint, chat_engine):
    ids = eos_prompt(chat_checkpoint)
    stopped = chat_engine.generate(ids, 12)
    full = chat_engine.generate(ids, 12, ignore_eos=True)
    assert len(full) == 12 and full[:len(stopped)] == stopped
    assert chat_engine.generate(ids, 12, eos_token_ids=[]) == full


def test_reading_back_every_few_steps_stops_at_the_same_token(chat_checkpoint, chat_engine):
    """check_every=3: the steps past the EOS inside the last chunk run on the device
    (counted in the report) and their tokens are dropped."""
    ids = eos_prompt(chat_checkpoint)
    ref = chat_engine.generate(ids, 12)
    s = chat_engine.stream(ids, 12, check_every=3)
    assert s.consume().tokens == ref
    assert s.speed.decode_steps == 3 * -(-(len(ref) - 1) // 3)
    # the cache holds the positions the steps processed, of the kept tokens only
    held = len(ids) + s.speed.decode_steps
    assert chat_engine.cache_state.tokens == (ids + ref)[:held]


def test_the_budget_ends_a_generation_that_does_not_stop(plain):
    path, model = plain
    s = model.stream(PROMPT, 5)
    assert len(s.consume().tokens) == 5 and s.finish_reason == "length"


# ---------------------------------------------------------------- stop strings

def test_a_stop_string_ends_the_text_before_it(plain):
    path, model = plain
    free = model.generate(PROMPT, 8)
    text = model.decode(free)
    stop = text[len(text) // 2:len(text) // 2 + 2]
    assert stop and stop in text
    s = model.stream(PROMPT, 8, stop_strings=[stop])
    pieces = list(s)
    assert s.finish_reason == "stop"
    assert s.text == text[:text.index(stop)]
    assert "".join(p.text for p in pieces) == s.text
    assert s.tokens == free[:len(s.tokens)] and len(s.tokens) < 8
    assert stop in model.decode(s.tokens)              # the last token completed it
    assert stop not in model.decode(s.tokens[:-1])


def test_text_that_may_begin_a_stop_string_is_held_back():
    class Chars:
        def decode(self, ids, skip_special_tokens=True):
            return "".join(map(chr, ids))

    s = Stopper(Stop(strings=("<end>", "xyz")), Chars())
    shown = [s.feed(ord(c)) for c in "ab<en"]
    assert shown == ["a", "b", "", "", ""]
    assert s.feed(ord("x")) == "<en"           # not "<end>"; "x" may begin "xyz"
    assert s.feed(ord("y")) == "" and s.finish() == "xy" and s.reason == "length"
    assert s.text == "ab<enxy"
    s = Stopper(Stop(strings=("<end>",)), Chars())
    assert [s.feed(ord(c)) for c in "q<end"] == ["q", "", "", "", ""]
    assert s.feed(ord(">")) == "" and s.reason == "stop" and s.text == "q"


def test_the_eos_token_text_is_not_part_of_the_reply(chat_checkpoint, chat_engine):
    ids = eos_prompt(chat_checkpoint)
    s = chat_engine.stream(ids, 12)
    pieces = list(s)
    assert isinstance(pieces[-1], Piece) and pieces[-1].token == IM_END
    assert s.text == chat_engine.decode(s.tokens[:-1])
    assert "<|im_end|>" not in chat_engine.decode(s.tokens, skip_special_tokens=False)[:-10]


# ---------------------------------------------------------------- errors

@pytest.mark.parametrize("kwargs, message", [
    (dict(stop_strings=[""]), "stop_strings[0] is empty"),
    (dict(stop_strings=[3]), "stop_strings[0] is int, not a string"),
    (dict(eos_token_ids=[300]), "eos_token_ids: 300 is not a token id of the vocabulary"),
    (dict(check_every=0), "check_every must be a positive int"),
])
def test_bad_stopping_settings_are_refused(plain, kwargs, message):
    with pytest.raises(GenerateInputError, match=message.replace("[", r"\[")):
        plain[1].generate(PROMPT, 4, **kwargs)


def test_stop_strings_need_a_tokenizer(qwen3_checkpoint_factory):
    model = Qwen3.from_pretrained(qwen3_checkpoint_factory(), device="cpu", max_seq_len=16)
    with pytest.raises(GenerateInputError, match="stop strings need a tokenizer"):
        model.generate([1, 2], 2, stop_strings=["x"])


def test_a_batch_is_refused_saying_so_and_a_batch_of_one_runs(plain):
    path, model = plain
    with pytest.raises(GenerateInputError) as info:
        model.generate([[1, 2, 3], [4, 5, 6]], 2)
    assert info.value.message == ("got a batch of 2 prompts: the engine decodes one "
                                  "sequence at a time (batch size 1)")
    assert info.value.hint == "call generate() once per prompt"
    assert model.generate([PROMPT], 3) == model.generate(np.array([PROMPT]), 3) \
        == model.generate(PROMPT, 3)


def test_stop_rules_take_the_checkpoint_eos_unless_told():
    assert stop_rules((2, 0)).eos_token_ids == (2, 0)
    assert stop_rules((2, 0), eos_token_ids=[5]).eos_token_ids == (5,)
    assert not stop_rules((2,), ignore_eos=True).needs_tokens
    assert stop_rules((), stop_strings="x").needs_tokens


def test_doctests():
    import doctest

    import tilelab.models.generation
    import tilelab.models.stopping

    for m in (tilelab.models.generation, tilelab.models.stopping):
        assert doctest.testmod(m).failed == 0
