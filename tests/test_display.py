"""helpers.display.bound: rounding noise printed as a bound, anything larger as digits."""

import math

from helpers.display import bound


def test_bound():
    assert bound(8.9e-16) == "< 1e-12"
    assert bound(0.0) == "< 1e-12"
    assert bound(2.3e-3) == "2.3e-03"
    assert bound(3e-8, floor=1e-5) == "< 1e-05"
    assert bound(1.0, floor=1e-3) == "1.0e+00"
    assert bound(-5e-13) == "< 1e-12"
    assert bound(math.nan) == "nan"


def test_bound_accepts_tensors_that_require_grad():
    import warnings

    import torch

    x = torch.tensor(3e-16, requires_grad=True) * 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert bound(x) == "< 1e-12"
