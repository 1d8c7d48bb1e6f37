"""Shared fixtures for the helpers tests.

Every test compares ``helpers`` against torch itself (``torch.nn.functional`` /
``torch.nn`` / autograd), never against helpers' own output.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

# torch's own normalisation entry points; helpers must never need any of them.
TORCH_NORM_FUNCTIONS = [
    (torch, "batch_norm"),
    (torch, "instance_norm"),
    (torch, "layer_norm"),
    (torch, "group_norm"),
    (torch, "rms_norm"),
    (torch, "native_layer_norm"),
    (torch, "native_batch_norm"),
    (torch, "native_group_norm"),
    (F, "batch_norm"),
    (F, "instance_norm"),
    (F, "layer_norm"),
    (F, "group_norm"),
    (F, "rms_norm"),
]


@pytest.fixture(autouse=True)
def _seed():
    """Seed torch before every test so each test is reproducible on its own."""
    torch.manual_seed(0)
    yield


@pytest.fixture
def no_torch_norms(monkeypatch):
    """Return a context manager that makes torch's normalisation functions raise.

    Usage: compute the torch references first, then ``with no_torch_norms(): ...``.
    """

    def _forbidden(name):
        def _raise(*args, **kwargs):
            raise AssertionError(f"helpers called torch's own normalisation function {name}")

        return _raise

    class _Patch:
        def __enter__(self):
            self._mp = pytest.MonkeyPatch()
            for owner, name in TORCH_NORM_FUNCTIONS:
                # raising=True: fail loudly if torch renamed one of them
                self._mp.setattr(owner, name, _forbidden(f"{owner.__name__}.{name}"))
            return self

        def __exit__(self, *exc):
            self._mp.undo()
            return False

    return _Patch


def _run(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - we want the exact class
        return e
    return None


@pytest.fixture
def same_error():
    """Return ``check(torch_fn, helpers_fn, *must_contain)``.

    Runs both zero-argument callables, asserts that torch raises, that helpers raises an
    exception of exactly the same class, and that helpers' message mentions every string
    in ``must_contain`` (the sizes/numbers a user needs to fix the call). Returns the
    helpers exception.
    """

    def check(torch_fn, helpers_fn, *must_contain):
        e_torch = _run(torch_fn)
        e_helpers = _run(helpers_fn)
        assert e_torch is not None, "test set-up error: torch accepted this input"
        assert e_helpers is not None, (
            f"helpers accepted an input torch rejects with {type(e_torch).__name__}: {e_torch}"
        )
        assert type(e_helpers) is type(e_torch), (
            f"torch raised {type(e_torch).__name__}({e_torch}) but helpers raised "
            f"{type(e_helpers).__name__}({e_helpers})"
        )
        msg = str(e_helpers)
        for s in must_contain:
            assert str(s) in msg, f"helpers' message {msg!r} does not mention {s!r}"
        return e_helpers

    return check
