"""The lesson 11 checkers: correct solutions (written independently of the checkers'
references) pass; wrong ones, written the way a learner writes them, fail with the right
diagnosis. A checker never raises, never prints, and leaves torch's global RNG alone."""

import torch
import torch.nn.functional as F

from helpers.checks import CheckResult
from helpers.checks import check_power_iteration, check_weight_norm, check_weight_norm_grad


def _unit_norm(v):
    """One norm per output unit, written with a loop (independent of the checkers' code)."""
    norms = torch.stack([torch.sqrt((v[i] ** 2).sum()) for i in range(v.shape[0])])
    return norms.reshape((-1,) + (1,) * (v.dim() - 1))


# ---------------------------------------------------------------- forward
def wn_ok(v, g):
    return g * v / _unit_norm(v)


def wn_ok_einsum(v, g):
    flat = v.reshape(v.shape[0], -1)
    return (g.reshape(-1, 1) * flat / torch.linalg.vector_norm(flat, dim=1, keepdim=True)).reshape(v.shape)


def wn_forgot_g(v, g):
    return v / _unit_norm(v)


def wn_no_division(v, g):
    return g * v


def wn_columns(v, g):
    return g * v / torch.linalg.vector_norm(v, dim=0, keepdim=True)


def wn_whole(v, g):
    return g * v / torch.linalg.vector_norm(v)


def wn_last_dim(v, g):
    return g * v / torch.linalg.vector_norm(v, dim=-1, keepdim=True)


def wn_squared(v, g):
    return g * v / (v.reshape(v.shape[0], -1) ** 2).sum(1).reshape((-1,) + (1,) * (v.dim() - 1))


def wn_no_keepdim(v, g):
    return g * v / v.reshape(v.shape[0], -1).norm(dim=1)


def test_weight_norm_checker():
    for fn in (wn_ok, wn_ok_einsum):
        r = check_weight_norm(fn)
        assert isinstance(r, CheckResult) and r.passed and r.mistake is None, r.message
    for fn, key in [(wn_forgot_g, "forgot_g"), (wn_no_division, "no_normalization"),
                    (wn_columns, "wrong_axis"), (wn_whole, "whole_tensor_norm"),
                    (wn_last_dim, "last_dim_only"), (wn_squared, "squared_norm"),
                    (wn_no_keepdim, "missing_keepdim")]:
        r = check_weight_norm(fn)
        assert not r.passed and r.mistake == key, (fn.__name__, r.mistake, r.message)
        assert r.failed_cases
        first, second = r.message.split("\n")[0], r.message
        assert first.startswith("✘") and "可能的错误" in second


# ---------------------------------------------------------------- gradient
def grad_ok(grad_w, v, g):
    """Through the quotient rule, unit by unit, without the projection formula."""
    out = torch.empty_like(v)
    for i in range(v.shape[0]):
        n = torch.sqrt((v[i] ** 2).sum())
        gi = g.reshape(-1)[i]
        # w = gi v / n; dw/dv = gi (I/n - v v^T / n^3)
        out[i] = gi * (grad_w[i] / n - v[i] * (grad_w[i] * v[i]).sum() / n ** 3)
    return out


def grad_ok_autograd(grad_w, v, g):
    with torch.enable_grad():
        vv = v.clone().requires_grad_()
        norm = torch.sqrt((vv.reshape(v.shape[0], -1) ** 2).sum(1)).reshape(g.shape)
        return torch.autograd.grad(g * vv / norm, vv, grad_w)[0]


def grad_no_projection(grad_w, v, g):
    return g / _unit_norm(v) * grad_w


def _proj(grad_w, v, sign=-1):
    n = _unit_norm(v)
    along = (grad_w * v).reshape(v.shape[0], -1).sum(1).reshape(n.shape) / n
    return grad_w + sign * along * v / n


def grad_no_scale(grad_w, v, g):
    return _proj(grad_w, v)


def grad_forgot_g(grad_w, v, g):
    return _proj(grad_w, v) / _unit_norm(v)


def grad_sign(grad_w, v, g):
    return g / _unit_norm(v) * _proj(grad_w, v, +1)


def grad_squared(grad_w, v, g):
    return g / _unit_norm(v) ** 2 * _proj(grad_w, v)


def test_weight_norm_grad_checker():
    for fn in (grad_ok, grad_ok_autograd):
        r = check_weight_norm_grad(fn)
        assert r.passed, r.message
    for fn, key in [(grad_no_projection, "no_projection"), (grad_no_scale, "no_scale"),
                    (grad_forgot_g, "forgot_g"), (grad_sign, "projection_sign"),
                    (grad_squared, "squared_norm")]:
        r = check_weight_norm_grad(fn)
        assert not r.passed and r.mistake == key, (fn.__name__, r.mistake, r.message)


# ---------------------------------------------------------------- power iteration
def power_ok(W, v):
    u = torch.mv(W, v)
    u = u / torch.sqrt((u ** 2).sum())
    v = torch.mv(W.t(), u)
    v = v / torch.sqrt((v ** 2).sum())
    return u, v, torch.dot(u, torch.mv(W, v))


def power_no_normalize(W, v):
    u = W @ v
    v = W.T @ u
    return u, v, u @ W @ v


def power_transposed(W, v):
    u = F.normalize(W.T @ v, dim=0)
    v = F.normalize(W @ u, dim=0)
    return u, v, u @ W.T @ v


def power_stale(W, v):
    u = F.normalize(W @ v, dim=0)
    sigma = u @ W @ v
    return u, F.normalize(W.T @ u, dim=0), sigma


def power_frobenius(W, v):
    u, v, _ = power_ok(W, v)
    return u, v, torch.sqrt((W ** 2).sum())


def test_power_iteration_checker():
    assert check_power_iteration(power_ok).passed
    for fn, key in [(power_no_normalize, "no_normalize"), (power_transposed, "transposed"),
                    (power_stale, "stale_sigma"), (power_frobenius, "frobenius")]:
        r = check_power_iteration(fn)
        assert not r.passed and r.mistake == key, (fn.__name__, r.mistake, r.message)


# ---------------------------------------------------------------- the contract
def test_checkers_never_raise_print_or_touch_the_rng(capsys):
    def boom(*args):
        raise ZeroDivisionError("learner bug")

    def wrong_type(*args):
        return "not a tensor"

    def consumes_rng(*args):
        return torch.randn(3)

    state = torch.random.get_rng_state()
    for check in (check_weight_norm, check_weight_norm_grad, check_power_iteration):
        for fn in (boom, wrong_type):
            r = check(fn)
            assert not r.passed and r.failed_cases
            assert "ZeroDivisionError" in r.message or "str" in r.message
        check(power_ok if check is check_power_iteration else wn_ok)
    assert torch.equal(state, torch.random.get_rng_state())
    assert capsys.readouterr().out == ""
    r = check_weight_norm(consumes_rng)  # the learner's own RNG use is theirs
    assert not r.passed
