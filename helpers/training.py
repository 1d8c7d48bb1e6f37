"""A minimal training loop for the lessons' small experiments (seconds on a laptop CPU)."""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["train_classifier"]


def train_classifier(model: nn.Module, x: torch.Tensor, y: torch.Tensor, lr: float,
                     steps: int = 100, batch_size: int = 64, momentum: float = 0.9,
                     seed: int = 0) -> dict[str, float]:
    r"""Train ``model`` on ``(x, y)`` with SGD (``lr``, ``momentum``) and cross-entropy for
    ``steps`` minibatches of ``batch_size`` samples drawn with replacement (generator seeded
    by ``seed``), then evaluate on all of ``x`` in eval mode.

    Returns ``{"loss": ..., "accuracy": ...}``; a run whose loss becomes NaN or infinite
    (diverged) stops early and reports ``loss = inf`` and ``accuracy = nan``.

    Lesson 01.
    """
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    model.train()
    for _ in range(steps):
        idx = torch.randint(0, len(x), (batch_size,), generator=g)
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        if not math.isfinite(loss.item()):
            return {"loss": math.inf, "accuracy": float("nan")}
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y).item()
        accuracy = (logits.argmax(1) == y).float().mean().item()
    return {"loss": loss if math.isfinite(loss) else math.inf, "accuracy": accuracy}
