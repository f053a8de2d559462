"""tilelab.perf: timing, counted work, GPU specs, ceilings, the roofline and the one
prediction of a launch's time (:func:`predict`, returning a :class:`Prediction` that names
the roofline bound, the kernel body, the launch floor and the total).

``predict`` and ``Prediction`` are imported from :mod:`tilelab.perf.prediction` on first
use, so importing a sibling module (``tilelab.perf.bench``) does not load the model.

Example:
    >>> from tilelab.perf import predict
    >>> from tilelab.perf.counting import elementwise
    >>> predict(elementwise(1 << 26), "h200").limited_by
    'DRAM'
"""

__all__ = ["predict", "Prediction"]


def __getattr__(name: str):
    """``predict`` and ``Prediction``, from :mod:`tilelab.perf.prediction` on first use."""
    if name in __all__:
        from tilelab.perf import prediction

        return getattr(prediction, name)
    raise AttributeError(f"module 'tilelab.perf' has no attribute {name!r}")
