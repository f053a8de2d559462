"""The library kernels as torch custom ops (tilelab.kernels.torch_ops): right results,
sound fake-tensor functions, and no graph break under ``torch.compile`` (on the CPU,
where the ops run through tilelab's interpreter)."""
from __future__ import annotations

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import tilelab.kernels.torch_ops as T  # noqa: E402


def _inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 64, generator=g)
    y = torch.randn(4, 64, generator=g)
    w = torch.randn(64, generator=g)
    b = torch.randn(64, 16, generator=g)
    return x, y, w, b


def test_each_op_computes_what_torch_does():
    x, y, w, b = _inputs()
    torch.testing.assert_close(T.add(x, y), x + y)
    torch.testing.assert_close(T.sub(x, y), x - y)
    torch.testing.assert_close(T.mul(x, w), x * w)          # a broadcast row
    torch.testing.assert_close(T.matmul(x, b), x @ b, atol=2e-2, rtol=2e-3)  # tf32
    torch.testing.assert_close(T.rms_norm(x, w, 1e-5),
                               torch.nn.functional.rms_norm(x, (64,), w, 1e-5))
    torch.testing.assert_close(T.softmax(x), x.softmax(-1))
    h = torch.randn(3, 40).half()
    torch.testing.assert_close(T.softmax(h), h.float().softmax(-1).half())


@pytest.mark.parametrize("op, args", [
    ("add", lambda x, y, w, b: (x, y)),
    ("mul", lambda x, y, w, b: (x, w)),
    ("matmul", lambda x, y, w, b: (x, b)),
    ("rms_norm", lambda x, y, w, b: (x, w, 1e-6)),
    ("softmax", lambda x, y, w, b: (x,)),
])
def test_the_registrations_pass_torchs_checks(op, args):
    """Schema, fake-tensor function and dispatch agree (torch.library.opcheck)."""
    torch.library.opcheck(getattr(torch.ops.tilelab, op).default, args(*_inputs(1)),
                          test_utils=("test_schema", "test_faketensor",
                                      "test_aot_dispatch_dynamic"))


def _model(x, y, w, b):
    h = torch.ops.tilelab.add(x, y)
    h = torch.ops.tilelab.rms_norm(h, w, 1e-6) * 0.5
    return torch.ops.tilelab.softmax(torch.ops.tilelab.matmul(h, b))


def test_torch_compile_fullgraph_runs_the_ops_and_matches_eager():
    torch._dynamo.reset()
    args = _inputs(2)
    compiled = torch.compile(_model, fullgraph=True)   # inductor, as users compile
    torch.testing.assert_close(compiled(*args), _model(*args))
    args = _inputs(3)                                  # new data, same graph
    torch.testing.assert_close(compiled(*args), _model(*args))


def test_the_fake_function_rejects_mismatched_shapes_while_tracing():
    torch._dynamo.reset()
    f = torch.compile(lambda a, b: torch.ops.tilelab.matmul(a, b), fullgraph=True,
                      backend="aot_eager")
    with pytest.raises(Exception, match="a is \\(4, 8\\) but b is \\(9, 2\\)"):
        f(torch.ones(4, 8), torch.ones(9, 2))


@pytest.mark.subprocess
def test_importing_tilelab_does_not_import_torch():
    code = "import sys, tilelab, tilelab.kernels; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
