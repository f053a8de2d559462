"""Quantized checkpoints, recognised and named so they can be refused up front.

The engine computes with bfloat16, float16 or float32 weights. A quantized checkpoint
(FP8, AWQ, GPTQ, bitsandbytes, compressed-tensors, ...) would otherwise fail late and
obscurely: its projections are missing (``q_proj.qweight`` stands where
``q_proj.weight`` should be), or stored as a dtype the loader does not read, or, worst,
they load and compute garbage (FP8 values read without their scales). So the format is
recognised from what the checkpoint says about itself: ``config.json``'s
``quantization_config`` (its ``quant_method``), then the names and dtypes of the stored
tensors (the ``qweight``/``qzeros``/``scales`` of GPTQ and AWQ, the
``weight_scale_inv`` of FP8 blocks, the ``absmax``/``quant_map`` of bitsandbytes 4-bit,
``SCB`` of its 8-bit, FP8 and integer dtypes), and the error names the format.

Example:
    >>> quantization_problem({"quantization_config": {"quant_method": "fp8"}})
    "quantization_config.quant_method is 'fp8' (FP8 weights with block scales): quantized checkpoints are not supported"
    >>> tensor_format(["model.layers.0.mlp.down_proj.qweight"], {})
    'GPTQ or AWQ (packed integer weights: qweight, qzeros, scales)'
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

__all__ = ["METHODS", "quantization_problem", "tensor_format", "QUANTIZED_HINT"]

#: quant_method values of transformers' quantization configs -> what they are
METHODS = {
    "fp8": "FP8 weights with block scales",
    "fbgemm_fp8": "FP8 weights (FBGEMM)",
    "awq": "AWQ 4-bit packed integer weights",
    "gptq": "GPTQ packed integer weights",
    "bitsandbytes": "bitsandbytes 8-bit or 4-bit weights",
    "compressed-tensors": "compressed-tensors (quantized or sparse weights)",
    "aqlm": "AQLM additive quantization",
    "quanto": "quanto quantized weights",
    "eetq": "EETQ 8-bit weights",
    "hqq": "HQQ quantized weights",
    "torchao": "torchao quantized weights",
    "bitnet": "BitNet ternary weights",
    "vptq": "VPTQ vector-quantized weights",
    "spqr": "SpQR quantized weights",
    "higgs": "HIGGS quantized weights",
    "mxfp4": "MXFP4 4-bit floating-point weights",
    "fp_quant": "FP-Quant weights",
}

#: what to do instead (every refusal of a quantized checkpoint gives it)
QUANTIZED_HINT = ("tilelab.models runs bfloat16, float16 or float32 weights: use the "
                  "unquantized checkpoint (e.g. Qwen/Qwen3-0.6B rather than "
                  "Qwen/Qwen3-0.6B-FP8 or an -AWQ / -GPTQ variant)")

# tensor-name suffixes of quantized formats -> the format they reveal
_SUFFIXES = (
    ((".qweight", ".qzeros", ".g_idx"), "GPTQ or AWQ (packed integer weights: qweight, "
                                        "qzeros, scales)"),
    ((".weight_scale_inv",), "FP8 (weights with block scales: weight_scale_inv)"),
    ((".weight_scale", ".input_scale"), "FP8 or compressed-tensors (per-tensor scales: "
                                        "weight_scale)"),
    ((".weight_packed", ".weight_zero_point"), "compressed-tensors (packed weights)"),
    ((".SCB", ".weight_format"), "bitsandbytes 8-bit (SCB)"),
    ((".absmax", ".quant_map", ".quant_state.bitsandbytes__nf4",
      ".quant_state.bitsandbytes__fp4"), "bitsandbytes 4-bit (NF4/FP4 with absmax)"),
)
# safetensors dtype codes of quantized storage -> the format they reveal
_DTYPES = {
    "F8_E4M3": "FP8 (float8_e4m3fn weights)", "F8_E5M2": "FP8 (float8_e5m2 weights)",
    "F8_E8M0": "MX (float8_e8m0 scales)", "F4": "FP4 weights",
    "I8": "8-bit integer weights", "U8": "packed 4-bit or 8-bit integer weights",
    "I4": "4-bit integer weights", "U4": "4-bit integer weights",
}


def quantization_problem(raw: Mapping[str, Any]) -> str | None:
    """What ``config.json``'s ``quantization_config`` says the checkpoint is, as the
    refusal's message, or None when there is none.

    Example:
        >>> quantization_problem({"quantization_config": {"quant_method": "awq",
        ...                                               "bits": 4}})
        "quantization_config.quant_method is 'awq' (AWQ 4-bit packed integer weights): quantized checkpoints are not supported"
        >>> quantization_problem({}) is None
        True
    """
    q = raw.get("quantization_config")
    if q is None:
        return None
    method = q.get("quant_method") if isinstance(q, dict) else None
    if method is None:
        return (f"quantization_config is present ({_short(q)}): quantized checkpoints "
                "are not supported")
    what = METHODS.get(str(method).lower())
    named = f" ({what})" if what else ""
    return (f"quantization_config.quant_method is {method!r}{named}: quantized "
            "checkpoints are not supported")


def tensor_format(names: Iterable[str], dtypes: Mapping[str, str]) -> str | None:
    """The quantized format that the tensors' names or dtypes reveal (``dtypes``: name
    -> safetensors dtype code), else None.

    Example:
        >>> tensor_format(["a.weight"], {"a.weight": "F8_E4M3"})
        'FP8 (float8_e4m3fn weights)'
        >>> tensor_format(["a.weight"], {"a.weight": "BF16"}) is None
        True
    """
    names = list(names)
    for suffixes, what in _SUFFIXES:
        if any(n.endswith(suffixes) for n in names):
            return what
    for name in names:
        what = _DTYPES.get(dtypes.get(name, ""))
        if what is not None and name.endswith(".weight"):
            return what
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
