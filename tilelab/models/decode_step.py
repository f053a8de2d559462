"""One decode step of the Qwen3 engine: its launches, buffers and CUDA graph.

The step reads the current token and position from device memory
(:class:`~tilelab.models.kv_cache.KVCache`), so it is recorded once with
``tl.graph()`` and replayed unchanged; its last kernels write the next token into
``tokens[pos + 1]`` and advance ``pos``. Per layer, with the RMSNorms fused into the
GEMVs that read their output (``StepConfig.fuse_norms``, the default) and the residual
stream entering the layer held as two parts, ``h`` plus the previous layer's ``down``
(the embedding alone in layer 0, which adds no ``down``):

==========================  =========================================================
``norm_qkv_gemv``           ``qkv = W_qkv @ rmsnorm(h + down)`` (q, k and v weights
                            concatenated; the sum and the norm formed as x is read)
``qk_norm_rope_kv``         q/k per-head RMSNorm, RoPE at ``pos``, k and v into the cache
``attn``                    GQA attention over positions ``0..pos`` in one pass
                            (contexts up to ``StepConfig.one_pass_upto``); longer
                            ones run ``attn_split`` (split-KV attention) and
                            ``attn_combine`` (the merge of the splits) instead
``o_gemv_residual``         ``h' = W_o @ attn + h + down``
``norm_gate_up_silu_gemv``  ``act = silu(W_gate @ n) * (W_up @ n)``, ``n = rmsnorm(h')``
``down_gemv``               ``down = W_down @ act``
==========================  =========================================================

``h`` and ``h'`` are the two buffers of :attr:`DecodeStep.h`, swapping roles each layer
(layer ``i`` reads ``h[i % 2]`` and writes ``h[(i + 1) % 2]``), because a kernel may not
read the tensor it writes. That is 6 kernels per layer (7 in the split form). Unfused
(``fuse_norms=False``), the layer runs 9: ``add_rms_norm`` (``h = h + down``,
``n = rmsnorm(h)``; layer 0: ``rms_norm`` of the embedding), ``qkv_gemv`` of ``n``, the
attention kernels, ``o_gemv_residual`` (``h' = h + W_o @ attn``), ``rms_norm`` of
``h'``, ``gate_up_silu_gemv`` and ``down_gemv`` (8 in the one-pass form).

Every form then runs ``final_add_rms_norm``, the head and ``advance``; the embedding of
``tokens[pos]`` (``embed``) opens the step. The head (:data:`HEADS`, chosen when the
step is built) is ``lm_head_partial`` (logits and per-block max/index, or a flag for
NaN/infinite logits) then ``pick_token`` (the combine: argmax, or with the ``"gumbel"``
head the Gumbel-max sample of softmax(logits / T), and the flag into
``cache.nonfinite``); the ``"sample"`` head replaces ``pick_token`` with
``sample_partial`` and ``sample_pick`` (:mod:`tilelab.models.sample_head`: penalties,
top-k, top-p, min-p and the seeded draw, with the settings read from the cache). That is
``5 + 6 * layers`` launches fused with one-pass attention, ``5 + 7 * layers`` fused and
split (one more with the ``"sample"`` head).

With ``StepConfig.fuse_rope_attention`` the one-pass form runs 5 kernels per layer:
``rope_attn`` (:mod:`tilelab.kernels.decode.rope_attention`) takes the place of
``qk_norm_rope_kv`` and ``attn``. It normalizes and rotates the raw q and k itself and
folds the new key and value into its attention from registers, so the cache row it
would write is not used; it stages them in :attr:`DecodeStep.kv_new` and writes the previous
layer's staged row into that layer's cache (a safe kernel may not write the tensor
region it reads, so each layer's row lands one layer late), and ``kv_store`` writes the
last layer's after the layers. That is ``6 + 5 * layers`` launches; every cache row is
written before the step ends, with the same values as the plain form's. The split form
is unchanged.

The one-pass and split forms are two launch lists (:attr:`DecodeStep.forms`) and two
graphs; the step tracks the position on the host (``Qwen3.begin`` sets it, each
:meth:`~DecodeStep.run` or :meth:`~DecodeStep.replay` advances it) and runs the form
its context calls for, so a replayed decode switches graphs once, at
``StepConfig.one_pass_upto`` positions.

Example:
    >>> step = DecodeStep(weights, cache)                         # doctest: +SKIP
    >>> step.run(); step.capture(); step.replay().wait()          # doctest: +SKIP
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import tilelab as tl
from tilelab.kernels import add_rms_norm, rms_norm
from tilelab.kernels._host import hinted
from tilelab.kernels.decode.step import (LOG2E, advance_kernel, decode_attention_kernel,
                                         decode_combine_head_kernel, decode_split_kernel,
                                         embed_at_kernel, lm_head_partial_kernel,
                                         pick_token_kernel, qk_norm_rope_cache_kernel)
from tilelab.kernels.decode.gemv import (GemvConfig, default_gemv_config, gemv_silu_mul,
                                         row_gemv)
from tilelab.kernels.decode.rope_attention import kv_store_kernel, rope_attention_kernel
from tilelab.models.kv_cache import pow2_at_least
from tilelab.models.plug import plugged
from tilelab.models.sample_head import SampleHead, check_tiles

__all__ = ["StepConfig", "StepLaunch", "DecodeStep", "HEAD_KINDS", "HEADS", "whole_chunks"]

#: the launches that turn the final hidden state into the next token (prefill runs them)
HEAD_KINDS = ("lm_head_partial", "pick_token", "sample_partial", "sample_pick", "advance")
#: the heads a step may be built with: greedy, temperature-only sampling (Gumbel-max in
#: the lm_head kernel), and sampling with penalties and filters (its own two kernels)
HEADS = ("argmax", "gumbel", "sample")
#: the smallest MMA's rows: a GQA group's query rows are padded to this many
_MMA_ROWS = 16


@dataclass(frozen=True)
class StepConfig:
    """Tiles of the decode step's kernels (what a GPU run tunes).

    ``gemv``: tiles of every projection GEMV (None: :func:`default_gemv_config` per
    shape); ``head``: tiles of the lm_head GEMV (its rows per block set the number of
    argmax partials); ``attn_bn``: keys per step of the split attention kernel;
    ``one_pass_bn``: keys per step of the one-pass kernel (None: ``attn_bn``; its one
    block per KV head walks the context serially, so fewer, larger steps shorten it:
    256, the default, replayed fastest of 64/128/256 in both Qwen3 steps);
    ``attn_splits``:
    KV splits per KV head, fixed when the step is built (None: two blocks per SM over
    the KV heads, at most one split per key tile of the cache; 1: the one-pass kernel
    at every context); ``one_pass_upto``: contexts of at most this many positions run
    the one-pass attention kernel (one block per KV head, no combine launch: one launch
    per layer fewer), longer ones the split kernels; the step keeps both forms and
    picks one per token by the position it tracks (0: always split);
    ``attn_occupancy``:
    blocks per SM hint of the split kernel; ``combine_chunk``, ``pick_chunk``: partials
    merged per step by the combine kernels; ``num_sms``: the SM count the defaults
    plan for (None: the device's; 132, an H200's, on the CPU backend);
    ``gemv_table``: per-projection tiles that win over ``gemv``, as
    ``((kind, n, k), GemvConfig)`` pairs (``kind`` is the launch's cost-table row, e.g.
    ``"qkv_gemv"``), which a tuning run measures (``benchmarks/decode/tune.py``);
    ``fuse_norms``: fold the RMSNorms of each layer into the GEMVs that read them (7
    kernels per layer instead of 9: see the module docstring); ``sample_candidates``:
    the candidate tile of the ``"sample"`` head (a power of two: the most ``top_k`` may
    be, and the candidates top-p and min-p see when top-k is off);
    ``sample_block``: logits per block of its partial kernel (grown for very large
    vocabularies so that the merge holds every block's candidates);
    ``fuse_rope_attention``: in the one-pass form, fold ``qk_norm_rope_kv`` into the
    attention kernel (``rope_attn``: the cache row written one layer late, the last
    layer's by ``kv_store``; see the module docstring): ``L + 1`` launches where the
    plain form runs ``2 L``. Off by default until the GPU has timed it.

    Example:
        >>> StepConfig(attn_splits=4).attn_splits, StepConfig().fuse_norms
        (4, True)
    """

    gemv: GemvConfig | None = None
    head: GemvConfig = GemvConfig(bn=16, bk=512)
    attn_bn: int = 64
    one_pass_bn: int | None = 256
    attn_splits: int | None = None
    #: on the H200 one pass beats the split pair alone up to about 256 positions, is
    #: 2 us slower at 512 (within what the pair's second launch costs in the step) and
    #: 9 us slower at 1024 (benchmarks/results/decode_h200_2026-12-05.json)
    one_pass_upto: int = 512
    attn_occupancy: int | None = 4
    combine_chunk: int = 16
    pick_chunk: int = 1024
    num_sms: int | None = None
    gemv_table: tuple[tuple[tuple[str, int, int], GemvConfig], ...] = ()
    fuse_norms: bool = True
    #: 64 candidates of 4096-logit blocks: Qwen3's vocabulary is 38 blocks, a merge of
    #: 2432 candidates in one 64 x 64 tile
    sample_candidates: int = 64
    sample_block: int = 4096
    fuse_rope_attention: bool = False

    def __post_init__(self) -> None:
        check_tiles(self.sample_candidates, self.sample_block)

    def gemv_for(self, kind: str, n: int, k: int) -> GemvConfig | None:
        """The tiles chosen for one projection: its ``gemv_table`` entry, else ``gemv``.

        Example:
            >>> cfg = StepConfig(gemv_table=((("down_gemv", 8, 16), GemvConfig(bn=8)),))
            >>> cfg.gemv_for("down_gemv", 8, 16).bn, cfg.gemv_for("qkv_gemv", 8, 16)
            (8, None)
        """
        for key, cfg in self.gemv_table:
            if key == (kind, n, k):
                return cfg
        return self.gemv


@dataclass
class StepLaunch:
    """One launch of the step: ``kind`` (the cost table's row), its layer (None
    outside the layers) and ``run()``, which issues it without waiting.

    Example:
        >>> [l.kind for l in step.launches][:2]                      # doctest: +SKIP
        ['embed', 'norm_qkv_gemv']
    """

    kind: str
    layer: int | None
    run: Callable[[], Any] = field(repr=False)


def whole_chunks(splits: int, chunk: int) -> int:
    """``splits`` rounded down to whole chunks of the combine kernel (or, below one
    chunk, to a power of two), so the combine never loads a partly padded chunk of
    partials (on the H200 such a chunk made the merge tens of times slower).

    Example:
        >>> whole_chunks(33, 16), whole_chunks(12, 16), whole_chunks(1, 16)
        (32, 8, 1)
    """
    if splits >= chunk:
        return splits - splits % chunk
    return 1 << (splits.bit_length() - 1)


def _sms(device: str, cfg: StepConfig) -> int:
    if cfg.num_sms is not None:
        return cfg.num_sms
    if device == "cpu":
        return 132        # plan like an H200, as the library does: same code paths
    from tilelab.runtime.device import num_sms

    return num_sms(device)


class DecodeStep:
    """The buffers and launches of one decode step (see the module docstring).

    ``sample`` chooses the head (:data:`HEADS`): False or ``"argmax"`` (greedy), True
    or ``"gumbel"`` (Gumbel-max with the cache's ``seed`` and ``inv_temp``), or
    ``"sample"`` (:class:`~tilelab.models.sample_head.SampleHead`: the cache's
    ``sampling`` settings and ``history``). ``kernels`` maps roles of
    :data:`tilelab.models.plug.ROLES` to user kernels the step launches in their place.

    Example:
        >>> step = DecodeStep(weights, cache, sample=False)          # doctest: +SKIP
        >>> len(step.launches) == 5 + 7 * cfg.num_hidden_layers       # doctest: +SKIP
        True
    """

    def __init__(self, weights: Any, cache: Any, config: StepConfig | None = None, *,
                 sample: bool | str = False, kernels: Any = None):
        self.weights, self.cache = weights, cache
        self.config = config or StepConfig()
        #: the head (one of HEADS)
        self.head = _head_name(sample)
        self.sample = self.head != "argmax"
        #: user kernels by role (tilelab.models.plug), launched in the built-ins' place
        self.plugged = plugged(kernels, fuse_norms=self.config.fuse_norms)
        c = weights.config
        self.model_config = c
        dev, dt = weights.device, weights.dtype
        hk, d = c.num_key_value_heads, c.head_dim
        g = c.num_attention_heads // hk
        self.nq, self.nkv = c.num_attention_heads * d, hk * d
        self.group = g
        empty = lambda shape, dtype=dt: tl.empty(shape, dtype, device=dev)  # noqa: E731
        self.h = (empty(c.hidden_size), empty(c.hidden_size))
        self.normed, self.down = empty(c.hidden_size), empty(c.hidden_size)
        self.qkv = empty(self.nq + 2 * self.nkv)
        self.q_rot = empty((hk, g, d))
        #: each layer's rotated new key and value (fuse_rope_attention), staged until the
        #: next layer's attention (the last layer's: ``kv_store``) writes them to the cache
        self.kv_new = empty((c.num_hidden_layers, hk, 2, d), cache.k.dtype) \
            if self.config.fuse_rope_attention else None
        self.attn = empty(self.nq)
        self.act = empty(c.intermediate_size)
        self.splits = self._splits(cache.capacity, dev)
        self.po = empty((hk, self.splits, g * d), "float32")
        self.plse = empty((hk, self.splits, g), "float32")
        head = self.config.head
        self.head_blocks = -(-c.vocab_size // head.bn)
        self.logits = empty(c.vocab_size, "float32")
        self.pval = empty(self.head_blocks, "float32")
        self.pidx = empty(self.head_blocks, "int32")
        #: the sampling head's scratch and launches (None for the other heads)
        self.sampler = SampleHead(c.vocab_size, dev, block=self.config.sample_block,
                                  candidates=self.config.sample_candidates) \
            if self.head == "sample" else None
        capacity = cache.capacity
        upto = capacity if self.config.attn_splits == 1 else self.config.one_pass_upto
        #: contexts (positions attended to) up to this run the one-pass form
        self.one_pass_upto = max(0, min(int(upto), capacity))
        #: launch lists by form (True: one-pass attention), each form the step may run
        self.forms: dict[bool, list[StepLaunch]] = {
            one: self._build(one) for one in (True, False)
            if (self.one_pass_upto > 0 if one else self.one_pass_upto < capacity)}
        self._graphs: dict[bool, Any] = {}
        #: the cache position the next step runs at, tracked on the host (set by
        #: ``Qwen3.begin``; None: read from the device when first needed)
        self.position: int | None = None

    # ---- building ---------------------------------------------------------------------
    def _splits(self, capacity: int, device: str) -> int:
        cfg = self.config
        tiles = -(-capacity // cfg.attn_bn)
        want = cfg.attn_splits
        if want is None:
            want = -(-2 * _sms(device, cfg) // self.model_config.num_key_value_heads)
        return whole_chunks(max(1, min(int(want), tiles)), cfg.combine_chunk)

    def _gemv_cfg(self, kind: str, n: int, k: int) -> GemvConfig:
        chosen = self.config.gemv_for(kind, n, k)
        if chosen is not None:
            return chosen
        return default_gemv_config(n, k, _sms(self.weights.device, self.config))

    def gemv_shapes(self) -> list[tuple[str, int, int]]:
        """The (kind, n, k) of each projection GEMV of a layer: what a tuning run times.

        Example:
            >>> step.gemv_shapes()[0]                                  # doctest: +SKIP
            ('norm_qkv_gemv', 6144, 2560)
        """
        c = self.model_config
        h, i = c.hidden_size, c.intermediate_size
        pre = "norm_" if self.config.fuse_norms else ""
        return [(pre + "qkv_gemv", self.nq + 2 * self.nkv, h),
                ("o_gemv_residual", h, self.nq), (pre + "gate_up_silu_gemv", i, h),
                ("down_gemv", h, i)]

    def stream(self, layer: int) -> tuple[tl.Tensor, tl.Tensor]:
        """``(h, h')``: the residual-stream buffer a layer reads and the one its o
        projection writes (fused: ``h[layer % 2]`` and ``h[(layer + 1) % 2]``; unfused:
        always ``h[0]`` and ``h[1]``, the norm before the layer rewriting ``h[0]``).

        Example:
            >>> step.stream(1) == (step.h[1], step.h[0])               # doctest: +SKIP
            True
        """
        if not self.config.fuse_norms:
            return self.h
        return self.h[layer % 2], self.h[(layer + 1) % 2]

    def one_pass_at(self, context: int) -> bool:
        """Whether a step attending to ``context`` positions runs the one-pass form.

        Example:
            >>> step.one_pass_at(129), step.one_pass_at(5000)          # doctest: +SKIP
            (True, False)
        """
        return context <= self.one_pass_upto

    def _form(self) -> bool:
        if len(self.forms) == 1:
            return next(iter(self.forms))
        if self.position is None:
            self.position = self.cache.position()
        return self.one_pass_at(self.position + 1)

    @property
    def launches(self) -> list[StepLaunch]:
        """The launches of the next step: the form its context runs (see
        ``StepConfig.one_pass_upto``).

        Example:
            >>> [l.kind for l in step.launches][:3]                      # doctest: +SKIP
            ['embed', 'norm_qkv_gemv', 'qk_norm_rope_kv']
        """
        return self.forms[self._form()]

    @property
    def graph(self) -> Any:
        """The recorded graph of the next step's form (None before :meth:`capture`)."""
        return self._graphs.get(self._form())

    @graph.setter
    def graph(self, g: Any) -> None:
        form = self._form()
        if g is None:
            self._graphs.pop(form, None)
        else:
            self._graphs[form] = g

    def _advanced(self) -> None:
        if self.position is not None:
            self.position += 1

    def _build(self, one_pass: bool) -> list[StepLaunch]:
        w, cache, c = self.weights, self.cache, self.model_config
        out: list[StepLaunch] = []
        add = lambda kind, layer, fn: out.append(StepLaunch(kind, layer, fn))  # noqa: E731
        add("embed", None, _async(embed_at_kernel, self.h[0].partition(min(
            1024, pow2_at_least(c.hidden_size))), w.embedding, cache.tokens, cache.pos))
        rope_attn = one_pass and self.config.fuse_rope_attention
        for i, lw in enumerate(w.layers):
            self._qkv(add, i, lw)
            if rope_attn:
                self._rope_attention(add, i, lw)
            else:
                self._qk_norm_rope_kv(add, i, lw)
                self._attention(add, i, one_pass)
            self._o_projection(add, i, lw)
            self._mlp_block(add, i, lw)
        if rope_attn:     # the last layer's new key and value: no next layer writes them
            last_k, last_v = cache.layer(len(w.layers) - 1)
            s, d = cache.capacity, c.head_dim
            add("kv_store", None, _async(
                kv_store_kernel, last_k.partition((1, s, d)), last_v.partition((1, s, d)),
                self.kv_new[len(w.layers) - 1], cache.pos))
        # the residual stream after the last layer: its h' plus its down projection
        if self.config.fuse_norms:
            last, free = self.stream(len(w.layers))
        else:
            free, last = self.h
        add("final_add_rms_norm", None, lambda: add_rms_norm(
            self.down, last, w.final_norm, eps=c.rms_norm_eps, out=(self.normed, free),
            sync=False))
        self._head(add)
        return out

    def _qkv(self, add: Callable, i: int, lw: Any) -> None:
        """Layer i's input norm and qkv projection (one launch fused, two unfused)."""
        c = self.model_config
        eps, hidden, n = c.rms_norm_eps, c.hidden_size, self.nq + 2 * self.nkv
        h_in, h_mid = self.stream(i)
        if self.config.fuse_norms:
            prev = self.down if i > 0 else None
            cfg = self._gemv_cfg("norm_qkv_gemv", n, hidden)
            user = self.plugged.get("norm_qkv_gemv")
            if user is not None:    # layer 0's stream has no down part: zeros stand in
                add("norm_qkv_gemv", i, _async(
                    user, self.qkv.partition(cfg.bn), lw.qkv, h_in,
                    self.down if i > 0 else self._zeros(), lw.input_norm, float(eps),
                    cfg.bk))
                return
            add("norm_qkv_gemv", i, lambda: row_gemv(
                lw.qkv, h_in, x2=prev, norm_weight=lw.input_norm, eps=eps, out=self.qkv,
                config=cfg, sync=False))
            return
        if i == 0:
            add("rms_norm", i, lambda: rms_norm(h_in, lw.input_norm, eps=eps,
                                                out=self.normed, sync=False))
        else:
            add("add_rms_norm", i, lambda: add_rms_norm(
                self.down, h_mid, lw.input_norm, eps=eps, out=(self.normed, h_in),
                sync=False))
        cfg = self._gemv_cfg("qkv_gemv", n, hidden)
        add("qkv_gemv", i, lambda: row_gemv(lw.qkv, self.normed, out=self.qkv,
                                            config=cfg, sync=False))

    def _heads(self) -> tuple[tl.Tensor, tl.Tensor, tl.Tensor]:
        """The raw q (Hkv, G, D), k and v (Hkv, D) views of the qkv projection."""
        hk, d = self.model_config.num_key_value_heads, self.model_config.head_dim
        nq, nkv = self.nq, self.nkv
        return (self.qkv[:nq].reshape(hk, self.group, d),
                self.qkv[nq:nq + nkv].reshape(hk, d), self.qkv[nq + nkv:].reshape(hk, d))

    def _qk_norm_rope_kv(self, add: Callable, i: int, lw: Any) -> None:
        """Layer i's q/k norm, RoPE and cache write (the plain form's own launch)."""
        c, cache = self.model_config, self.cache
        d, s = c.head_dim, cache.capacity
        kc, vc = cache.layer(i)
        q3, k2, v2 = self._heads()
        add("qk_norm_rope_kv", i, _async(
            qk_norm_rope_cache_kernel, self.q_rot.partition((1, pow2_at_least(self.group),
                                                             d)),
            kc.partition((1, s, d)), vc.partition((1, s, d)), q3, k2, v2, lw.q_norm,
            lw.k_norm, cache.cos, cache.sin, cache.pos,
            float(c.rms_norm_eps), d))

    def _attention(self, add: Callable, i: int, one_pass: bool) -> None:
        """Layer i's attention over the cache (``q_rot`` and the cache written)."""
        c, cache, cfg = self.model_config, self.cache, self.config
        hk, d = c.num_key_value_heads, c.head_dim
        kc, vc = cache.layer(i)
        gc = max(_MMA_ROWS, pow2_at_least(self.group))
        if one_pass:      # one launch: no partials to combine
            add("attn", i, _async(
                decode_attention_kernel, self.attn.reshape(hk, self.group, d).partition(
                    (1, gc, d)), self.q_rot, kc, vc, cache.pos, LOG2E / math.sqrt(d),
                cfg.one_pass_bn or cfg.attn_bn, d))
        else:
            self._split_attention(add, i, kc, vc, gc)

    def _rope_attention(self, add: Callable, i: int, lw: Any) -> None:
        """Layer i's q/k norm, RoPE and one-pass attention in one launch, which also
        writes layer i - 1's staged key and value into its cache (layer 0 writes
        nothing: two small stand-in tensors take the partitions it never stores to)."""
        c, cache, cfg = self.model_config, self.cache, self.config
        hk, d, s = c.num_key_value_heads, c.head_dim, cache.capacity
        kc, vc = cache.layer(i)
        q3, k2, v2 = self._heads()
        if i > 0:
            kp, vp = cache.layer(i - 1)
            prev = (kp.partition((1, s, d)), vp.partition((1, s, d)), self.kv_new[i - 1])
        else:
            kp, vp = self._stand_in()
            prev = (kp.partition((1, 1, d)), vp.partition((1, 1, d)), q3)
        gc = max(_MMA_ROWS, pow2_at_least(self.group))
        add("rope_attn", i, _async(
            rope_attention_kernel, self.attn.reshape(hk, self.group, d).partition(
                (1, gc, d)), self.kv_new[i].partition((1, 2, d)), prev[0], prev[1], q3, k2,
            v2, kc, vc, prev[2], lw.q_norm, lw.k_norm, cache.cos, cache.sin, cache.pos,
            float(c.rms_norm_eps), LOG2E / math.sqrt(d), cfg.one_pass_bn or cfg.attn_bn, d,
            int(i > 0)))

    def _stand_in(self) -> tuple[tl.Tensor, tl.Tensor]:
        """Two (Hkv, 1, D) tensors (made once) that layer 0's ``rope_attn`` takes as the
        previous layer's caches, never writing them."""
        if getattr(self, "_no_prev", None) is None:
            c, w = self.model_config, self.weights
            self._no_prev = tuple(tl.zeros((c.num_key_value_heads, 1, c.head_dim),
                                           self.cache.k.dtype, device=w.device)
                                  for _ in range(2))
        return self._no_prev

    def _o_projection(self, add: Callable, i: int, lw: Any) -> None:
        """Layer i's o projection with the residual stream added."""
        c, cfg = self.model_config, self.config
        h_in, h_mid = self.stream(i)
        o_cfg = self._gemv_cfg("o_gemv_residual", c.hidden_size, self.nq)
        # fused, the stream entering layer i > 0 is h + down: both parts are added
        res = (h_in, self.down) if cfg.fuse_norms and i > 0 else h_in
        add("o_gemv_residual", i, lambda: row_gemv(lw.o, self.attn, residual=res,
                                                   out=h_mid, config=o_cfg, sync=False))

    def _split_attention(self, add: Callable, i: int, kc: Any, vc: Any, gc: int) -> None:
        """Split-KV attention: the splits' partials, then their combine per query head."""
        c, cfg, cache = self.model_config, self.config, self.cache
        hk, d = c.num_key_value_heads, c.head_dim
        split = hinted(decode_split_kernel, occupancy=cfg.attn_occupancy)
        add("attn_split", i, _async(
            split, self.po.partition((1, 1, gc * d)), self.plse.partition((1, 1, gc)),
            self.q_rot, kc, vc, cache.pos, LOG2E / math.sqrt(d), cfg.attn_bn, d))
        chunk = min(cfg.combine_chunk, pow2_at_least(self.splits))
        add("attn_combine", i, _async(
            decode_combine_head_kernel, self.attn.reshape(hk, self.group, d).partition(
                (1, 1, d)), self.po.reshape(hk, self.splits, self.group, d), self.plse, chunk,
            d))

    def _mlp_block(self, add: Callable, i: int, lw: Any) -> None:
        c = self.model_config
        eps, inter, hidden = c.rms_norm_eps, c.intermediate_size, c.hidden_size
        h_mid = self.stream(i)[1]
        if self.config.fuse_norms:
            gu_cfg = self._gemv_cfg("norm_gate_up_silu_gemv", inter, hidden)
            add("norm_gate_up_silu_gemv", i, lambda: gemv_silu_mul(
                lw.gate_up, h_mid, norm_weight=lw.post_norm, eps=eps, out=self.act,
                config=gu_cfg, sync=False))
        else:
            add("rms_norm", i, lambda: rms_norm(h_mid, lw.post_norm, eps=eps,
                                                out=self.normed, sync=False))
            gu_cfg = self._gemv_cfg("gate_up_silu_gemv", inter, hidden)
            add("gate_up_silu_gemv", i, lambda: gemv_silu_mul(
                lw.gate_up, self.normed, out=self.act, config=gu_cfg, sync=False))
        d_cfg = self._gemv_cfg("down_gemv", hidden, inter)
        user = self.plugged.get("down_gemv")
        if user is not None:
            add("down_gemv", i, _async(user, self.down.partition(d_cfg.bn), lw.down,
                                       self.act, d_cfg.bk))
            return
        add("down_gemv", i, lambda: row_gemv(lw.down, self.act, out=self.down,
                                             config=d_cfg, sync=False))

    def _zeros(self) -> tl.Tensor:
        """A zero vector of the hidden size (made once): the down part of layer 0's
        stream for a plugged ``norm_qkv_gemv``."""
        if getattr(self, "_zero_down", None) is None:
            w = self.weights
            self._zero_down = tl.zeros(self.model_config.hidden_size, w.dtype,
                                       device=w.device)
        return self._zero_down

    def _head(self, add: Callable) -> None:
        w, cache, cfg = self.weights, self.cache, self.config
        head = cfg.head
        kern = hinted(lm_head_partial_kernel, occupancy=head.occupancy)
        add("lm_head_partial", None, _async(
            kern, self.logits.partition(head.bn), self.pval.partition(1),
            self.pidx.partition(1), w.lm_head, self.normed, cache.inv_temp, cache.seed,
            cache.pos, head.bk, head.latency or 0, int(self.head == "gumbel")))
        if self.sampler is not None:
            for kind, kernel, args in self.sampler.launches(self.logits, cache):
                add(kind, None, _async(kernel, *args))
        else:
            chunk = min(cfg.pick_chunk, pow2_at_least(self.head_blocks))
            add("pick_token", None, _async(pick_token_kernel, cache.tokens.partition(
                cache.capacity), cache.nonfinite.partition(cache.capacity), self.pval,
                self.pidx, cache.pos, chunk))
        add("advance", None, _async(advance_kernel, cache.pos.partition(1)))

    # ---- running ----------------------------------------------------------------------
    def run(self) -> Any:
        """Issue every launch of the step without waiting; returns the last future.

        Example:
            >>> step.run().wait()                                        # doctest: +SKIP
        """
        fut = None
        for launch in self.launches:
            fut = _future(launch.run())
        self._advanced()
        return fut

    def run_head(self) -> Any:
        """Issue only the head (lm_head, token pick, advance): after a prefill.

        Example:
            >>> step.run_head().wait()                                   # doctest: +SKIP
        """
        fut = None
        for launch in next(iter(self.forms.values())):   # the head is the same in both
            if launch.kind in HEAD_KINDS:
                fut = _future(launch.run())
        return fut

    def capture(self) -> Any:
        """Record the next step's form once as a graph (a CUDA graph on the GPU, a replay
        list on the CPU backend) and return it; later :meth:`replay` calls run it.

        Example:
            >>> step.capture(); step.replay().wait()                     # doctest: +SKIP
        """
        g = self.graph
        if g is None:
            with tl.graph() as g:
                for launch in self.launches:
                    launch.run()
            self.graph = g
        return g

    def replay(self) -> Any:
        """Run the recorded step once (the graph of its form, recorded on first use);
        returns its future.

        Example:
            >>> step.replay().wait()                                     # doctest: +SKIP
        """
        fut = self.capture().replay()
        self._advanced()
        return fut

    def kernels(self) -> list[Any]:
        """The distinct tilelab kernels the step launches (recorded from a capture).

        Example:
            >>> all(not k.options.unsafe for k in step.kernels())        # doctest: +SKIP
            True
        """
        seen: dict[int, Any] = {}
        for e in self.capture().entries:
            launcher = getattr(e, "launcher", None)
            if launcher is not None:
                seen.setdefault(id(launcher.kernel), launcher.kernel)
        return list(seen.values())


def _head_name(sample: bool | str) -> str:
    """The head a ``sample=`` argument names (see :class:`DecodeStep`)."""
    if isinstance(sample, bool):
        return "gumbel" if sample else "argmax"
    if sample not in HEADS:
        raise ValueError(f"DecodeStep: sample={sample!r} is not a head; the heads are "
                         f"{', '.join(HEADS)} (or False/True for argmax/gumbel)")
    return sample


def _async(kernel: Any, *args: Any) -> Callable[[], Any]:
    """A closure launching ``kernel(*args)`` without waiting (same argument objects
    every time, so the runtime's prepared launch is reused)."""
    return lambda: kernel.launch_async(*args)


def _future(result: Any) -> Any:
    """The future of a launch or a library call made with ``sync=False``."""
    if isinstance(result, tuple):
        return result[1]
    return result
