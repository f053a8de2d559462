"""Fixtures of tests/models: small real Qwen3 checkpoints written by transformers.

``tiny_qwen3`` is one default checkpoint (bf16, untied, one shard, 5.x config, with a
tokenizer); ``qwen3_checkpoint_factory(**kwargs)`` builds any other
:func:`tests.models.checkpoints.make_qwen3_checkpoint` variant once per session.
Without transformers or torch these fixtures skip (or fail under TILELAB_REQUIRE_TORCH=1).
"""
from __future__ import annotations


import pytest

from tilelab import config

from .checkpoints import make_qwen3_checkpoint


def _require_transformers() -> None:
    if config.require_torch():
        import torch  # noqa: F401
        import transformers  # noqa: F401
        return
    pytest.importorskip("torch")
    pytest.importorskip("transformers")


@pytest.fixture(scope="session")
def qwen3_checkpoint_factory(tmp_path_factory):
    """Build (or reuse) a checkpoint: ``factory(tie=True, shards=3, dtype="float16")``."""
    built = {}

    def factory(**kwargs):
        _require_transformers()
        key = tuple(sorted(kwargs.items()))
        if key not in built:
            name = "qwen3-" + "-".join(f"{k}{v}" for k, v in key) if key else "qwen3-default"
            built[key] = make_qwen3_checkpoint(tmp_path_factory.mktemp(name), **kwargs)
        return built[key]

    return factory


@pytest.fixture(scope="session")
def tiny_qwen3(qwen3_checkpoint_factory):
    """The path of the default tiny checkpoint (hidden 96, 2 layers, vocab 300, tokenizer)."""
    return qwen3_checkpoint_factory(tokenizer=True)
