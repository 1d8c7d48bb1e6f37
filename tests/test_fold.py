"""helpers.fold.fold_batch_norm: the folded layer equals layer followed by torch's BatchNorm
in eval mode, for Linear and Conv layers, with and without bias and affine."""

import pytest
import torch
from torch import nn

from helpers import norms
from helpers.fold import fold_batch_norm


def _trained_bn(bn, shape):
    bn.train()
    with torch.no_grad():
        for _ in range(3):
            bn(torch.randn(shape) * 3 + 1)
        if bn.weight is not None:
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.normal_()
    return bn.eval()


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("kind", ["linear", "conv1d", "conv2d", "conv3d"])
@pytest.mark.parametrize("bn_cls", ["torch", "helpers"])
def test_fold_equals_layer_then_bn(kind, affine, bias, bn_cls):
    torch.manual_seed(0)
    layer, bn_type, x = {
        "linear": (nn.Linear(5, 4, bias=bias), "BatchNorm1d", torch.randn(8, 5)),
        "conv1d": (nn.Conv1d(3, 4, 3, bias=bias), "BatchNorm1d", torch.randn(2, 3, 9)),
        "conv2d": (nn.Conv2d(3, 4, 3, padding=1, bias=bias), "BatchNorm2d", torch.randn(2, 3, 6, 6)),
        "conv3d": (nn.Conv3d(2, 4, 2, bias=bias), "BatchNorm3d", torch.randn(2, 2, 3, 3, 3)),
    }[kind]
    module = nn if bn_cls == "torch" else norms
    bn = getattr(module, bn_type)(4, affine=affine)
    bn = _trained_bn(bn, layer(x).shape)
    with torch.no_grad():
        torch.testing.assert_close(fold_batch_norm(layer, bn)(x), bn(layer(x)), rtol=1e-5, atol=1e-5)


def test_fold_errors():
    with pytest.raises(ValueError, match="running statistics"):
        fold_batch_norm(nn.Linear(3, 4), nn.BatchNorm1d(4, track_running_stats=False))
    with pytest.raises(ValueError, match="4 outputs"):
        fold_batch_norm(nn.Linear(3, 4), nn.BatchNorm1d(5))
    with pytest.raises(TypeError):
        fold_batch_norm(nn.ReLU(), nn.BatchNorm1d(4))


def test_train_classifier_learns_a_separable_problem_and_reports_divergence():
    from helpers.training import train_classifier

    torch.manual_seed(0)
    x = torch.randn(256, 2)
    y = (x[:, 0] > 0).long()
    model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 2))
    before = nn.functional.cross_entropy(model(x), y).item()
    result = train_classifier(model, x, y, lr=0.1, steps=200, batch_size=32)
    assert result["loss"] < before / 3 and result["accuracy"] > 0.95
    huge = train_classifier(nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 2)),
                            x * 1e6, y, lr=1e6, steps=50, batch_size=32)
    assert huge["loss"] == float("inf")
