"""Tiny Qwen3 chat checkpoints: a tokenizer with Qwen3's special tokens, Qwen3's chat
template, and an ``<|im_end|>`` that a greedy reply actually reaches.

:func:`make_chat_checkpoint` starts from :func:`~tests.models.checkpoints.
make_qwen3_checkpoint` (a random model written by transformers) and adds what a chat
model's directory holds:

- ``tokenizer.json``: byte-level BPE trained on a small corpus, with
  ``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>`` as special tokens 0, 1, 2 and
  ``<think>``, ``</think>`` as ordinary added tokens (as Qwen3 has them);
- ``tokenizer_config.json``: the real Qwen3 chat template
  (``qwen3_chat_template.jinja``, from a public copy of Qwen3's tokenizer_config.json),
  ``eos_token`` ``<|im_end|>``, ``pad_token`` ``<|endoftext|>``;
- ``config.json`` ``eos_token_id`` 2 and ``generation_config.json``
  ``eos_token_id`` [2, 0], as Qwen3's files have them.

A random model would almost never pick ``<|im_end|>``, so the checkpoint is made to:
transformers' greedy reply to ``EOS_PROMPT`` (the chat-rendered ``EOS_MESSAGES``) is
computed, the token ``T`` it picks at step ``eos_step`` is found, and the lm_head row
of ``<|im_end|>`` becomes ``T``'s row scaled by 1.05 (0.95 when ``T``'s logit is
negative there): its logit beats ``T``'s exactly where ``T`` led, so the greedy reply
ends with ``<|im_end|>`` at that step (or earlier, where ``T`` came within 5% of the
top). The model is saved again by transformers.

Example:
    >>> path = make_chat_checkpoint(tmp / "chat")                  # doctest: +SKIP
"""
from __future__ import annotations

import json
import pathlib

import pytest

from tilelab import config

from .checkpoints import CORPUS, make_qwen3_checkpoint

HERE = pathlib.Path(__file__).parent
#: Qwen3's chat template (hybrid thinking: enable_thinking)
QWEN3_TEMPLATE = (HERE / "qwen3_chat_template.jinja").read_text(encoding="utf-8")
ENDOFTEXT, IM_START, IM_END = 0, 1, 2
SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
#: the conversation whose greedy reply ends with <|im_end|>
EOS_MESSAGES = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "hello world from tilelab"}]
CHAT_CORPUS = CORPUS + (
    "system user assistant be brief and answer",
    "what is a tile and what is a partition",
    "think about the question then answer it",
)


#: the seed and reply length of the chat checkpoint the tests use: with them every
#: reference step up to the EOS is clear of a near tie (top-2 gap >= 0.17 at bf16
#: tolerance 0.15), so greedy tokens must agree with transformers' exactly
CHAT_SEED, CHAT_EOS_STEP = 4, 3
_BUILT: dict = {}


@pytest.fixture(scope="session")
def chat_checkpoint(tmp_path_factory) -> pathlib.Path:
    """The chat checkpoint of the tests (built once per session; skips without torch
    and transformers unless TILELAB_REQUIRE_TORCH=1)."""
    if config.require_torch():
        import torch  # noqa: F401
        import transformers  # noqa: F401
    else:
        pytest.importorskip("torch")
        pytest.importorskip("transformers")
    if "chat" not in _BUILT:
        _BUILT["chat"] = make_chat_checkpoint(tmp_path_factory.mktemp("qwen3-chat"),
                                              seed=CHAT_SEED, eos_step=CHAT_EOS_STEP)
    return _BUILT["chat"]


def make_chat_checkpoint(directory, *, eos_step: int = 3, vocab: int = 300,
                         enable_thinking: bool = False, **model) -> pathlib.Path:
    """Write the chat checkpoint (see the module docstring) under ``directory``;
    ``model`` keywords go to :func:`make_qwen3_checkpoint`.

    Example:
        >>> p = make_chat_checkpoint(tmp / "c", eos_step=4)           # doctest: +SKIP
    """
    model.setdefault("initializer_range", 0.1)
    path = make_qwen3_checkpoint(directory, vocab=vocab, tokenizer=False, **model)
    write_chat_tokenizer(path, vocab)
    _patch_json(path / "config.json", eos_token_id=IM_END, bos_token_id=ENDOFTEXT,
                pad_token_id=ENDOFTEXT)
    _end_reply_with_im_end(path, eos_prompt(path, enable_thinking), eos_step)
    _patch_json(path / "generation_config.json", eos_token_id=[IM_END, ENDOFTEXT],
                bos_token_id=ENDOFTEXT, pad_token_id=ENDOFTEXT)
    _patch_json(path / "config.json", eos_token_id=IM_END, bos_token_id=ENDOFTEXT,
                pad_token_id=ENDOFTEXT)
    return path


def eos_prompt(path, enable_thinking: bool = False) -> list[int]:
    """The token ids of ``EOS_MESSAGES`` rendered by transformers' apply_chat_template."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path))
    text = tok.apply_chat_template(EOS_MESSAGES, tokenize=False, add_generation_prompt=True,
                                   enable_thinking=enable_thinking)
    return tok(text, add_special_tokens=False)["input_ids"]


def write_chat_tokenizer(path: pathlib.Path, vocab: int) -> None:
    """tokenizer.json and tokenizer_config.json (see the module docstring)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab - 2, special_tokens=list(SPECIAL),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(CHAT_CORPUS, trainer=trainer)
    tok.add_tokens([AddedToken("<think>", special=False, normalized=False),
                    AddedToken("</think>", special=False, normalized=False)])
    assert tok.get_vocab_size() <= vocab, tok.get_vocab_size()
    assert [tok.token_to_id(t) for t in SPECIAL] == [ENDOFTEXT, IM_START, IM_END]
    tok.save(str(path / "tokenizer.json"))
    decoder = {str(tok.token_to_id(t)): {"content": t, "lstrip": False, "normalized": False,
                                         "rstrip": False, "single_word": False,
                                         "special": t in SPECIAL}
               for t in SPECIAL + ("<think>", "</think>")}
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "chat_template": QWEN3_TEMPLATE,
              "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": None,
              "unk_token": None, "add_bos_token": False, "added_tokens_decoder": decoder,
              "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
              "clean_up_tokenization_spaces": False, "model_max_length": 512,
              "split_special_tokens": False}
    (path / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


def _end_reply_with_im_end(path: pathlib.Path, prompt: list[int], eos_step: int) -> None:
    import torch
    from transformers import Qwen3ForCausalLM
    from transformers.utils import logging

    logging.disable_progress_bar()
    ref = Qwen3ForCausalLM.from_pretrained(str(path)).float().eval()
    with torch.no_grad():
        out = ref.generate(torch.tensor([prompt]), max_new_tokens=eos_step + 1,
                           do_sample=False, eos_token_id=None, pad_token_id=ENDOFTEXT,
                           output_logits=True, return_dict_in_generate=True)
    tokens = out.sequences[0, len(prompt):].tolist()
    target = tokens[eos_step]
    logit = float(out.logits[eos_step][0, target])
    model = Qwen3ForCausalLM.from_pretrained(str(path), dtype=torch.bfloat16)
    with torch.no_grad():
        w = model.lm_head.weight
        w[IM_END] = w[target].float().mul(1.05 if logit > 0 else 0.95).to(w.dtype)
    model.save_pretrained(str(path))


def _patch_json(file: pathlib.Path, **values) -> None:
    raw = json.loads(file.read_text()) if file.is_file() else {}
    raw.update(values)
    raw.pop("_from_model_config", None)   # as the hub's files are: read as written
    file.write_text(json.dumps(raw, indent=2, sort_keys=True) + "\n")
