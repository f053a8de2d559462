"""The decode engine's kernels (:mod:`tilelab.models` launches them; nothing here is a
host function of the library).

- :mod:`~tilelab.kernels.decode.step`: the step's small kernels that read the token, the
  position and the sampling state from device memory (embedding row, q/k norm + RoPE +
  cache write, split-KV attention, lm_head partials, token pick, advance, KV fill);
- :mod:`~tilelab.kernels.decode.rope_attention`: decode attention with the q/k norm,
  RoPE and cache write folded in;
- :mod:`~tilelab.kernels.decode.gemv`: the weight GEMVs with fused epilogues, and their
  host functions; :mod:`~tilelab.kernels.decode.gemv_mma`: the same GEMVs on the tensor
  cores;
- :mod:`~tilelab.kernels.decode.sampling`: penalties, top-k / top-p / min-p and the
  seeded sample on the device.

Example:
    >>> from tilelab.kernels.decode import step
    >>> step.advance_kernel.__name__
    'advance_kernel'
"""
