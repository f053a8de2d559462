"""Stopping, streaming, sessions and the speed report on the GPU (skipped without one):
the same chat checkpoint stops where transformers stops, streams the text it returns,
continues a session in the cache, and reports the decode's bandwidth against the card's
nominal roof."""
from __future__ import annotations

import re

import pytest

from tilelab.models import Qwen3
from tilelab.runtime.device import gpu_available, gpu_unavailable_reason

from .chat_checkpoints import EOS_MESSAGES, IM_END, chat_checkpoint, eos_prompt  # noqa: F401
from .qwen3_reference import hf_model

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not gpu_available(),
                                 reason=f"no usable GPU: {gpu_unavailable_reason()}")]


@pytest.fixture(scope="module")
def gpu(chat_checkpoint):
    return Qwen3.from_pretrained(chat_checkpoint, device="gpu", max_seq_len=256)


def test_gpu_eos_stopping_is_transformers_generate(chat_checkpoint, gpu):
    import torch

    ids = eos_prompt(chat_checkpoint)
    with torch.no_grad():
        out = hf_model(str(chat_checkpoint)).generate(torch.tensor([ids]), max_new_tokens=12,
                                                      do_sample=False)
    ref = out[0, len(ids):].tolist()
    assert ref[-1] == IM_END and len(ref) < 12
    assert gpu.generate(ids, 12) == ref
    assert gpu.generate(ids, 12, graph=False) == ref
    s = gpu.stream(ids, 12, check_every=4)
    assert s.consume().tokens == ref and s.finish_reason == "eos"


def test_gpu_stream_text_is_the_final_text(gpu):
    ids = gpu.encode("hello world from tilelab")
    s = gpu.stream(ids, 16, ignore_eos=True)
    pieces = list(s)
    assert "".join(p.text for p in pieces) == s.text == gpu.decode(s.tokens)
    assert s.tokens == gpu.generate(ids, 16, ignore_eos=True)


def test_gpu_session_prefills_only_new_tokens(chat_checkpoint, gpu):
    """The second turn prefills its new tokens only, and its first token is the one a
    fresh model picks from a prefill of the whole conversation (the reference's top-2
    logits are checked to be apart by more than the bf16 tolerance first)."""
    import numpy as np

    from .qwen3_reference import logits_tolerance

    chat = gpu.session(system="Be brief.", enable_thinking=False, max_new_tokens=6,
                       temperature=0)
    chat.send("hello world from tilelab")
    ids = gpu.encode(chat.prompt("the quick brown fox"))   # top-2 gap 0.48 on the CPU
    chat.send("the quick brown fox")
    speed = chat.last.speed
    assert 0 < speed.prefilled_tokens < speed.prompt_tokens == len(ids)
    fresh = Qwen3.from_pretrained(chat_checkpoint, device="gpu", max_seq_len=256)
    last = fresh.logits(ids)[-1]
    top2 = np.sort(last)[-2:]
    assert top2[1] - top2[0] > 2 * logits_tolerance(last)[0]
    assert chat.last.tokens[0] == int(np.argmax(last))


def test_gpu_speed_report_has_the_bandwidth_and_the_roof(gpu):
    s = gpu.stream(gpu.encode("the quick brown fox"), 32, ignore_eos=True)
    s.consume()
    report = s.speed
    assert report.device == "gpu" and report.decode_steps == 31
    assert report.decode_bytes > 0 and report.bandwidth > 0
    lines = report.lines()
    assert re.fullmatch(r"decode bandwidth: [\d.,]+ GB/s(, [\d.]+% of the .+'s nominal "
                        r"[\d,]+ GB/s| \(no nominal bandwidth known for .+\)) \([\d.]+ GB per "
                        r"step, weights and KV cache\)", lines[-1]), lines[-1]
