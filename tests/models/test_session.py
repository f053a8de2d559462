"""Sessions: a continued conversation prefills only its new tokens, in the same KV cache;
the context is a parameter, and going past it is a typed error."""
from __future__ import annotations

import numpy as np
import pytest

from tilelab.models import Qwen3
from tilelab.models.errors import GenerateInputError
from tilelab.models.prefill import prefill
from tilelab.models.qwen3 import ContextLengthError
from tilelab.models.session import CacheState, StaleStreamError, common_prefix

from .chat_checkpoints import chat_checkpoint  # noqa: F401 (fixture)

PROMPT = [3, 17, 101, 250, 7, 42, 199]


@pytest.fixture(scope="module")
def path(qwen3_checkpoint_factory):
    return qwen3_checkpoint_factory(initializer_range=0.1)


def test_a_prefill_from_a_position_continues_the_full_prefill(path):
    """Prefilling a prompt in two parts (the second attending to the first's cached
    keys and values) gives the hidden states of one prefill of it all."""
    model = Qwen3.from_pretrained(path, device="cpu", max_seq_len=32)
    ids = PROMPT + [9, 33, 71]
    whole = prefill(model.weights, model.cache, ids).numpy().astype(np.float32)
    model.cache.discard()
    prefill(model.weights, model.cache, ids[:4])
    tail = prefill(model.weights, model.cache, ids[4:], start=4).numpy().astype(np.float32)
    np.testing.assert_array_equal(tail, whole[4:])
    k_whole, _ = model.cache.contents(1, len(ids))
    np.testing.assert_array_equal(k_whole[:, :4], model.cache.contents(1, 4)[0])


def test_continuing_prefills_only_the_new_tokens(path):
    model = Qwen3.from_pretrained(path, device="cpu", max_seq_len=48)
    first = model.generate(PROMPT, 4, reuse_cache=True)
    assert model.cache_state.tokens == PROMPT + first[:3]   # 3 steps: 3 new positions
    ids = PROMPT + first + [11, 12, 13]
    s = model.stream(ids, 4, reuse_cache=True)
    s.consume()
    assert s.speed.prompt_tokens == len(ids)
    assert s.speed.prefilled_tokens == len(ids) - len(PROMPT) - 3   # the rest only
    fresh = Qwen3.from_pretrained(path, device="cpu", max_seq_len=48)
    assert s.tokens == fresh.generate(ids, 4)
    assert "reused from the KV cache" in s.speed.lines()[0]


def test_a_different_prompt_reuses_only_the_common_prefix(path):
    model = Qwen3.from_pretrained(path, device="cpu", max_seq_len=48)
    model.generate(PROMPT, 2, reuse_cache=True)
    other = PROMPT[:3] + [5, 6]
    s = model.stream(other, 3, reuse_cache=True)
    s.consume()
    assert s.speed.prefilled_tokens == 2
    fresh = Qwen3.from_pretrained(path, device="cpu", max_seq_len=48)
    assert s.tokens == fresh.generate(other, 3)
    again = model.stream(other, 3, reuse_cache=True)   # the whole prompt is cached:
    again.consume()                                    # its last token is prefilled again
    assert again.speed.prefilled_tokens == 1 and again.tokens == s.tokens


def test_without_reuse_and_after_logits_the_prompt_is_prefilled_whole(path):
    model = Qwen3.from_pretrained(path, device="cpu", max_seq_len=48)
    model.generate(PROMPT, 2, reuse_cache=True)
    s = model.stream(PROMPT + [1], 2)                  # reuse_cache=False, the default
    s.consume()
    assert s.speed.prefilled_tokens == len(PROMPT) + 1
    model.logits(PROMPT)
    assert model.cache_state.tokens == []
    s = model.stream(PROMPT + [1], 2, reuse_cache=True)
    s.consume()
    assert s.speed.prefilled_tokens == len(PROMPT) + 1


def test_a_chat_session_prefills_each_new_message_only(chat_checkpoint):
    """The second turn reuses the cache up to where the re-rendered conversation first
    differs from the tokens it holds: Qwen3's template renders an earlier answer without
    the empty thinking block its turn was generated after, so the system prompt and the
    first question are reused, the answer and the new question prefilled."""
    model = Qwen3.from_pretrained(chat_checkpoint, device="cpu", max_seq_len=256)
    chat = model.session(system="Be brief.", enable_thinking=False, max_new_tokens=6)
    opening = model.encode(chat.prompt("hello world from tilelab"))
    chat.send("hello world from tilelab")
    held = list(model.cache_state.tokens)
    ids = model.encode(chat.prompt("what is a tile"))
    chat.send("what is a tile")
    speed = chat.last.speed
    assert speed.prompt_tokens == len(ids)
    reused = common_prefix(held, ids)
    assert speed.prefilled_tokens == len(ids) - reused
    think = model.encode("<think>\n\n</think>\n\n")
    assert opening[-len(think):] == think and reused == len(opening) - len(think)


def test_the_context_is_a_parameter_and_exceeding_it_is_a_typed_error(path):
    model = Qwen3.from_pretrained(path, device="cpu", max_seq_len=20)
    assert (model.max_seq_len, model.cache.capacity) == (20, 32)
    with pytest.raises(ContextLengthError) as info:
        model.generate(PROMPT, 14)
    assert info.value.message == ("7 prompt tokens + 14 new tokens exceed the KV cache's 20 "
                                  "positions (max_seq_len)")
    assert info.value.hint == ("ask for fewer new tokens, or load the model with a larger "
                               "max_seq_len= (up to 512, max_position_embeddings)")
    assert len(model.generate(PROMPT, 13, ignore_eos=True)) == 13


def test_a_session_past_the_context_keeps_its_conversation(chat_checkpoint):
    model = Qwen3.from_pretrained(chat_checkpoint, device="cpu", max_seq_len=48)
    chat = model.session(max_new_tokens=4, enable_thinking=False)
    chat.send("hi")
    before = list(chat.messages)
    with pytest.raises(ContextLengthError, match="exceed the KV cache's 48 positions"):
        chat.send("the quick brown fox jumps over the lazy dog " * 2)
    assert chat.messages == before


@pytest.mark.parametrize("kwargs, message", [
    (dict(max_seq_len=1), "Qwen3: max_seq_len must be from 2 to 1073741824, got 1"),
    (dict(max_seq_len=64, max_tokens=32), "Qwen3: max_seq_len=64 and max_tokens=32 "
                                          "disagree; they are one setting"),
])
def test_bad_contexts_are_refused(path, kwargs, message):
    weights = Qwen3.from_pretrained(path, device="cpu", max_seq_len=8).weights
    with pytest.raises(GenerateInputError) as info:
        Qwen3(weights, **kwargs)
    assert info.value.message == message


def test_a_superseded_stream_refuses_to_go_on(path):
    model = Qwen3.from_pretrained(path, device="cpu", max_seq_len=48)
    s = model.stream(PROMPT, 6, ignore_eos=True)
    next(s)
    model.generate([1, 2], 2)
    with pytest.raises(StaleStreamError, match="this token stream was superseded"):
        list(s)


def test_cache_state_bookkeeping():
    s = CacheState()
    t1 = s.claim()
    s.record(t1, [1, 2, 3])
    t2 = s.claim()
    s.record(t1, [9])                  # a superseded generation records nothing
    assert s.tokens == [1, 2, 3] and s.reusable([1, 2, 3, 4]) == 3
    s.record(t2, [])
    assert s.reusable([1, 2]) == 0 and common_prefix([1, 2], [1, 3]) == 1


def test_doctests():
    import doctest

    import tilelab.models.session
    import tilelab.models.speed

    for m in (tilelab.models.session, tilelab.models.speed):
        assert doctest.testmod(m).failed == 0
