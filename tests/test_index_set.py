"""helpers.functional.index_set_norm: the four norms as four choices of the index set S_i
(Wu & He 2018, section 3.1), each checked against torch's own layer."""

import pytest
import torch
import torch.nn.functional as F

from helpers.functional import index_set_norm

SHAPES = [(4, 6, 5), (2, 6, 3, 4), (3, 6, 2, 2, 2)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_four_norms_are_four_index_sets(shape):
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=torch.float64) * 2 + 0.5
    c = shape[1]
    torch.testing.assert_close(index_set_norm(x, c, True), F.batch_norm(x, None, None, training=True))
    torch.testing.assert_close(index_set_norm(x, 1, False), F.layer_norm(x, shape[1:]))
    torch.testing.assert_close(index_set_norm(x, c, False), F.instance_norm(x))
    for g in (2, 3):
        torch.testing.assert_close(index_set_norm(x, g, False), F.group_norm(x, g))


def test_half_precision_and_bad_groups():
    x = (torch.randn(2, 4, 8) * 3 + 1).bfloat16()
    torch.testing.assert_close(index_set_norm(x, 2, False), F.group_norm(x, 2))
    with pytest.raises(RuntimeError, match="cannot be split"):
        index_set_norm(x, 3, False)


def test_adaptive_instance_norm_imposes_style_statistics():
    """AdaIN's output has the style's per-channel mean and std and the content's normalised
    pattern: it equals instance_norm(content) * std(style) + mean(style), computed with torch."""
    from helpers.functional import adaptive_instance_norm

    torch.manual_seed(0)
    content = torch.randn(2, 3, 6, 6, dtype=torch.float64) * 2 + 1
    style = torch.randn(2, 3, 5, 5, dtype=torch.float64) * 0.5 - 3
    out = adaptive_instance_norm(content, style, eps=0.0)
    torch.testing.assert_close(out.mean((2, 3)), style.mean((2, 3)))
    torch.testing.assert_close(out.std((2, 3), unbiased=False), style.std((2, 3), unbiased=False))
    expected = (F.instance_norm(content, eps=0.0) * style.std((2, 3), unbiased=False)[..., None, None]
                + style.mean((2, 3))[..., None, None])
    torch.testing.assert_close(out, expected)
    with pytest.raises(RuntimeError, match="same N"):
        adaptive_instance_norm(content, style[:, :2])
