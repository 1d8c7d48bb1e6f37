"""Lesson 14 (helpers.atlas, helpers.checks.atlas): each method against an independent
reference (torch where it has the method, otherwise the paper's equations or a property the
method promises), and the two checkers proven by banks of wrong and right solutions written
the way a learner writes them."""

import math

import pytest
import torch
import torch.nn.functional as F

from helpers import atlas as A
from helpers.checks import CheckResult, check_frn, check_switchable_norm

D = torch.float64


def _x(*shape, seed=0, scale=2.0, shift=1.0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=D) * scale + shift


# ---------------------------------------------------------------- torch as the reference
@pytest.mark.parametrize("size", [1, 2, 3, 4, 5])
def test_lrn_matches_torch(size):
    x = _x(3, 7, 4, 5)
    ref = torch.nn.LocalResponseNorm(size, alpha=0.3, beta=0.75, k=2.0)(x)
    torch.testing.assert_close(A.local_response_norm(x, size, 0.3, 0.75, 2.0), ref)


def test_lrn_on_1d_and_3d_inputs():
    for shape in [(2, 6, 9), (2, 6, 3, 4, 2)]:
        x = _x(*shape)
        torch.testing.assert_close(A.local_response_norm(x, 3), torch.nn.LocalResponseNorm(3)(x))


@pytest.mark.parametrize("which, ref", [
    (0, lambda x: F.instance_norm(x)),
    (1, lambda x: F.layer_norm(x, x.shape[1:])),
    (2, lambda x: F.batch_norm(x, None, None, training=True)),
])
def test_switchable_norm_one_hot_is_in_ln_bn(which, ref):
    x = _x(4, 6, 3, 5)
    w = torch.zeros(3, dtype=D)
    w[which] = 1
    ones, zeros = torch.ones(6, dtype=D), torch.zeros(6, dtype=D)
    torch.testing.assert_close(A.switchable_norm(x, w, w, ones, zeros), ref(x))


def test_batch_instance_norm_ends_are_bn_and_in():
    x = _x(4, 6, 3, 5)
    ones, zeros = torch.ones(6, dtype=D), torch.zeros(6, dtype=D)
    torch.testing.assert_close(A.batch_instance_norm(x, ones, ones, zeros),
                               F.batch_norm(x, None, None, training=True))
    torch.testing.assert_close(A.batch_instance_norm(x, zeros, ones, zeros), F.instance_norm(x))
    # rho is clipped to [0, 1], as after each update in the paper
    torch.testing.assert_close(A.batch_instance_norm(x, 3 * ones, ones, zeros),
                               A.batch_instance_norm(x, ones, ones, zeros))


def test_conditional_bn_with_constant_modulation_is_bn():
    x = _x(4, 3, 2, 2)
    w, b = torch.tensor([0.5, 1.0, 2.0], dtype=D), torch.tensor([1.0, 0.0, -1.0], dtype=D)
    got = A.conditional_batch_norm(x, w.expand(4, 3), b.expand(4, 3))
    torch.testing.assert_close(got, F.batch_norm(x, None, None, w, b, training=True))


# ---------------------------------------------------------------- the papers' equations
def test_frn_by_hand():
    # one channel, one sample, values 1..4: nu^2 = 7.5
    x = torch.arange(1.0, 5.0, dtype=D).view(1, 1, 2, 2)
    g, b, t = (torch.tensor([v], dtype=D) for v in (2.0, -1.0, 0.0))
    z = A.frn(x, g, b, t, eps=0.0)
    expected = torch.clamp(2 * x / math.sqrt(7.5) - 1, min=0.0)
    torch.testing.assert_close(z, expected)


def test_frn_and_evonorm_s0_are_batch_independent():
    x = _x(5, 4, 3, 3)
    p = torch.tensor([0.5, 1.0, 1.5, 2.0], dtype=D)
    for f in (lambda x: A.frn(x, p, p, -p), lambda x: A.evonorm_s0(x, p, p, p, groups=2)):
        torch.testing.assert_close(f(x)[:2], f(x[:2]))
    # B0 uses the batch variance: it is not batch independent
    assert not torch.allclose(A.evonorm_b0(x, p, p, p)[:2], A.evonorm_b0(x[:2], p, p, p))


def test_evonorm_b0_and_s0_by_their_formulas():
    x = _x(3, 4, 2, 3)
    v1 = torch.tensor([0.0, 0.5, 1.0, -0.5], dtype=D)
    ones, zeros = torch.ones(4, dtype=D), torch.zeros(4, dtype=D)
    # B0 with v1 = 0: x / max(batch std, instance std)
    bstd = (x.var((0, 2, 3), unbiased=False, keepdim=True) + 1e-5).sqrt()
    istd = (x.var((2, 3), unbiased=False, keepdim=True) + 1e-5).sqrt()
    torch.testing.assert_close(A.evonorm_b0(x, zeros, ones, zeros), x / torch.maximum(bstd, istd))
    # S0 with v1 = 0: sigmoid(0) = 1/2 times GroupNorm without centring in the numerator
    gstd = (x.view(3, 2, 2, 2, 3).var((2, 3, 4), unbiased=False, keepdim=True) + 1e-5).sqrt()
    torch.testing.assert_close(A.evonorm_s0(x, zeros, ones, zeros, groups=2),
                               0.5 * x / gstd.expand(3, 2, 2, 2, 3).reshape(x.shape))
    assert A.evonorm_s0(x, v1, ones, zeros, groups=2).shape == x.shape


def test_zca_whitening_gives_identity_covariance_and_is_symmetric():
    x = _x(512, 5) @ _x(5, 5, seed=1)
    y, w = A.zca_whitening_matrix(x)
    torch.testing.assert_close(y.T @ y / 512, torch.eye(5, dtype=D))
    torch.testing.assert_close(w, w.T)
    cov = (x - x.mean(0)).T @ (x - x.mean(0)) / 512
    torch.testing.assert_close(w @ cov @ w, torch.eye(5, dtype=D))


def test_iternorm_converges_to_zca():
    g = torch.Generator().manual_seed(3)
    q, _ = torch.linalg.qr(torch.randn(4, 4, generator=g, dtype=D))
    x = torch.randn(1024, 4, generator=g, dtype=D) * torch.tensor([1.0, 1.3, 1.6, 2.0], dtype=D) @ q
    _, zca = A.zca_whitening_matrix(x)
    errors = [float((A.iternorm_whitening_matrix(x, t)[1] - zca).norm() / zca.norm())
              for t in (1, 2, 3, 4, 5, 6, 12)]
    assert all(b < a for a, b in zip(errors[:6], errors[1:6])), errors  # falls step by step
    assert errors[-1] < 1e-12  # converged (quadratically, to rounding)


def test_power_norm_forward_uses_the_running_quadratic_mean():
    pn = A.PowerNorm(3, alpha=0.9, dtype=D)
    x = _x(8, 3)
    y = pn(x)
    torch.testing.assert_close(y, x / math.sqrt(1 + 1e-5))  # divides by the previous psi (1)
    torch.testing.assert_close(pn.running_phi, 0.9 + 0.1 * (x ** 2).mean(0))
    # one sample's output does not depend on the rest of its batch
    pn2 = A.PowerNorm(3, dtype=D)
    pn2.running_phi.copy_(pn.running_phi)
    pn.eval(), pn2.eval()
    torch.testing.assert_close(pn(x)[:1], pn2(x[:1]))


def test_scale_norm_and_single_scale_rms_norm():
    x = _x(4, 16)
    y = A.scale_norm(x, 3.0)
    torch.testing.assert_close(y.norm(dim=-1), torch.full((4,), 3.0, dtype=D))
    torch.testing.assert_close(A.single_scale_rms_norm(x, 0.75, eps=0.0),
                               A.scale_norm(x, 0.75 * math.sqrt(16)))
    torch.testing.assert_close(A.single_scale_rms_norm(x, 1.0, eps=1e-6),
                               F.rms_norm(x, (16,), eps=1e-6))


def test_cross_iteration_compensation_is_exact_for_a_linear_layer():
    g = torch.Generator().manual_seed(0)
    past = [(torch.randn(16, 4, generator=g, dtype=D) + 1, torch.randn(3, 4, generator=g, dtype=D))
            for _ in range(3)]
    now = torch.randn(3, 4, generator=g, dtype=D)
    truth = torch.stack([x.mean(0) @ now.T for x, _ in past]).mean(0)
    torch.testing.assert_close(A.cross_iteration_mean(past, now), truth)
    assert (A.cross_iteration_mean(past, now, compensate=False) - truth).abs().max() > 0.1


def test_film_and_adaln_zero_identity_at_init():
    h = _x(2, 3, 4, 4)
    gamma, beta = _x(2, 3, seed=1), _x(2, 3, seed=2)
    torch.testing.assert_close(A.film(h, gamma, beta)[1, 2], gamma[1, 2] * h[1, 2] + beta[1, 2])
    torch.manual_seed(0)
    block = A.AdaLNZeroBlock(8, 5, dtype=D)
    x, c = _x(2, 6, 8), _x(2, 5, seed=3)
    torch.testing.assert_close(block(x, c), x)
    with torch.no_grad():
        block.modulation.bias.fill_(0.1)  # once the modulation moves, the block is not the identity
    assert (block(x, c) - x).abs().max() > 1e-3


def test_mix_ln_layout_and_layernorm_scaling():
    assert A.mix_ln_layout(12, 0.25) == ["post"] * 3 + ["pre"] * 9
    assert A.mix_ln_layout(4, 0.0) == ["pre"] * 4 and A.mix_ln_layout(4, 1.0) == ["post"] * 4
    with pytest.raises(ValueError):
        A.mix_ln_layout(0)
    h = F.layer_norm(_x(5, 32), (32,))
    torch.testing.assert_close(A.layernorm_scaling(h, 4), h / 2)
    plain, scaled = A.pre_ln_stack_variance(12), A.pre_ln_stack_variance(12, scaled=True)
    assert scaled[-1] < plain[-1] and plain[-1] > plain[0]


def test_bad_shapes_are_named():
    with pytest.raises(ValueError, match=r"\(N, C, H, W\)"):
        A.frn(torch.ones(3, 4), torch.ones(4), torch.ones(4), torch.ones(4))
    with pytest.raises(ValueError, match="divide"):
        A.evonorm_s0(torch.ones(1, 3, 2, 2), torch.ones(3), torch.ones(3), torch.ones(3), groups=2)


def test_the_map_covers_the_methods():
    names = {row[0] for row in A.ATLAS}
    for needed in ["FRN + TLU", "EvoNorm-B0", "EvoNorm-S0", "Switchable Norm", "Batch-Instance Norm",
                   "Decorrelated BN", "IterNorm", "PowerNorm", "ScaleNorm", "single-scale RMSNorm",
                   "Cross-iteration BN", "adaLN-Zero", "Mix-LN", "LayerNorm Scaling",
                   "Local Response Norm", "BatchNorm", "LayerNorm", "RMSNorm", "WeightNorm",
                   "adaptive gradient clipping", "fused LN / RMSNorm kernels"]:
        assert needed in names, needed
    assert all(len(row) == 5 for row in A.ATLAS)


def _lesson_tables():
    """The markdown tables of section 9 of lesson 14, English and Chinese, as lists of rows."""
    import pathlib

    import nbformat

    nb = nbformat.read(pathlib.Path(__file__).parent.parent / "notebooks" / "14_atlas.ipynb", 4)
    out = {}
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if cell.cell_type != "markdown" or not cell.source.startswith("## 9."):
            continue
        rows = [line for line in cell.source.splitlines() if line.startswith("| ")][1:]
        out["en" if "lang-en" in tags else "zh"] = [
            [c.strip() for c in line.strip().strip("|").split(" | ")] for line in rows]
    return out


def test_the_lesson_table_is_the_decision_map_data():
    tables = _lesson_tables()
    assert set(tables) == {"en", "zh"}
    for lang in ("en", "zh"):
        assert tables[lang] == A.decision_map_table(lang), lang


def test_decision_map_data_covers_the_issue_settings_and_statuses():
    settings = " ".join(row["setting"][0] for row in A.DECISION_MAP)
    for needed in ["batch", "CNN", "sequence", "conditional generation", "low precision",
                   "inference cost", "style"]:
        assert needed in settings, needed
    for row in A.DECISION_MAP:
        assert row["panel"] in ("cnn", "seq")
        assert 1 <= len(row["arrows"]) <= 2
        statuses = {a[2] for a in row["arrows"]}
        assert statuses <= set(A.STATUSES)
        # the row's printed status names every arrow's status
        for s in statuses:
            word = {"established": "established", "speculative": "speculative",
                    "kernel": "per kernel"}[s]
            assert word in row["status"][0], (row["setting"][0], s)
        assert any(ch in row["backed"][0] for ch in "§0123456789") or "paper" in row["backed"][0]
    with pytest.raises(ValueError):
        A.decision_map_table("fr")


@pytest.mark.parametrize("panel", ["cnn", "seq"])
def test_decision_map_figure_draws_one_arrow_per_method_in_its_style(panel):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.text import Annotation

    fig = A.decision_map_figure(panel)
    arrows = [a for a in fig.findobj(Annotation) if a.arrow_patch is not None]
    rows = [r for r in A.DECISION_MAP if r["panel"] == panel]
    expected = [a[2] for r in rows for a in r["arrows"]]
    assert len(arrows) == len(expected)
    style = {"established": "-", "speculative": "--", "kernel": ":"}  # solid, dashed, dotted
    assert sorted(a.arrow_patch.get_linestyle() for a in arrows) == sorted(style[s] for s in expected)
    from matplotlib.text import Text

    texts = " ".join(t.get_text() for t in fig.findobj(Text))
    for r in rows:
        assert r["setting"][0] in texts and r["setting"][1] in texts
    plt.close(fig)
    with pytest.raises(ValueError):
        A.decision_map_figure("rnn")


# ---------------------------------------------------------------- the two checkers' banks
# (tests/grader_bank/atlas.py, also run by python -m tools.grader_audit)
from grader_bank.atlas import SOLUTIONS  # noqa: E402


@pytest.mark.parametrize("sol", SOLUTIONS, ids=lambda s: f"{s.target}-{s.name}")
def test_checker_bank(sol):
    check = {"check_switchable_norm": check_switchable_norm, "check_frn": check_frn}[sol.target]
    r = check(sol.fn)
    assert isinstance(r, CheckResult)
    if sol.right:
        assert r.passed and r.mistake is None, (sol.name, r.message)
        return
    assert not r.passed and r.failed_cases and r.message.startswith("✘"), r.message
    if sol.expect is None:  # a reduction without keepdim: a shape or broadcasting failure
        assert r.mistake in (None, "missing_keepdim"), r.message
    else:
        assert r.mistake == sol.expect, (sol.name, r.mistake, r.message)
        assert "Likely mistake" in r.message and "可能的错误" in r.message


def test_banks_are_big_enough():
    for target in ("check_switchable_norm", "check_frn"):
        mine = [s for s in SOLUTIONS if s.target == target]
        assert sum(s.right for s in mine) >= 3 and sum(not s.right for s in mine) >= 8, target


@pytest.mark.parametrize("check", [check_frn, check_switchable_norm])
@pytest.mark.parametrize("learner", ["raises", "garbage", "not_written"])
def test_checkers_keep_the_contract(check, learner, capsys):
    def not_written(*a):
        raise NotImplementedError
    fn = {"raises": lambda *a: 1 / 0, "garbage": lambda *a: "not a tensor",
          "not_written": not_written}[learner]
    torch.manual_seed(7)
    expected = torch.rand(2)
    torch.manual_seed(7)
    r = check(fn)
    assert torch.equal(torch.rand(2), expected)
    assert isinstance(r, CheckResult) and not r
    assert capsys.readouterr().out == ""
    if learner == "not_written":
        assert r.mistake == "not_implemented" and "not written yet" in r.message
