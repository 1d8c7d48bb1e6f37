"""helpers.widgets: the compute functions against independent references (sampling theory,
hand-computed values, torch's own F.batch_norm / F.layer_norm / F.group_norm /
F.instance_norm / F.rms_norm, autograd on a freshly built model), and the explorers: they
build, their plain-text form is one fixed line, and moving a slider redraws the figure and
puts the right numbers in the readout."""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F

from helpers import transformer as HT
from helpers import widgets as W


def _numbers(html: str) -> list[str]:
    """The bold values of a readout table."""
    return re.findall(r"<b>(.*?)</b>", html)


# ---- shared pieces -------------------------------------------------------------------------

def test_figure_png_closes_the_figure_and_is_png():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    before = len(plt.get_fignums())
    data = W.figure_png(fig)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(plt.get_fignums()) == before - 1


def test_slider_kinds_and_bad_kind():
    s = W.slider("int", "L", 3, min=1, max=5)
    assert (s.value, s.min, s.max, s.continuous_update) == (3, 1, 5, False)
    assert W.slider("log", "eps", 1e-5, base=10, min=-8, max=-1).value == pytest.approx(1e-5)
    with pytest.raises(ValueError, match="kind must be one of"):
        W.slider("dial", "x", 1)


def test_explorer_needs_controls():
    with pytest.raises(ValueError, match="at least one control"):
        W.Explorer("a", "b", {}, lambda: None)


# ---- lesson 01: BatchNorm's batch statistics ------------------------------------------------

@pytest.mark.parametrize("b", [2, 8, 64])
def test_batch_mean_spread_is_sigma_over_sqrt_b(b):
    r = W.batch_statistics_spread(b, num_batches=4000, mean=3.0, std=2.0, seed=1)
    # the sd of an sd estimate from n draws has relative error about 1/sqrt(2n) = 1.1%
    assert r["mean_spread"] == pytest.approx(2.0 / math.sqrt(b), rel=0.05)
    assert r["mean_theory"] == pytest.approx(2.0 / math.sqrt(b), rel=1e-12)
    assert r["std_spread"] == pytest.approx(r["std_theory"], rel=0.06)
    assert float(r["batch_mean"].mean()) == pytest.approx(3.0, abs=4 * 2.0 / math.sqrt(b * 4000))


def test_batch_std_theory_hand_values():
    # B = 2: s = |x1 - x2| / 2 with x1 - x2 ~ N(0, 2): sd = sqrt(2)/2 * sqrt(1 - 2/pi)
    assert W.batch_std_spread_theory(2) == pytest.approx(math.sqrt(2) / 2 * math.sqrt(1 - 2 / math.pi),
                                                         rel=1e-12)
    # large B: sd of the sample std tends to sigma / sqrt(2B)
    assert W.batch_std_spread_theory(10_000, std=3.0) == pytest.approx(3.0 / math.sqrt(20_000), rel=1e-3)


def test_batch_normalised_value_matches_torch_batch_norm(no_torch_norms):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(50, 5, generator=g, dtype=torch.float64)  # the same draws (mean 0, std 1)
    # each batch is one channel of 5 values: (B, C=1) per batch, training-mode BatchNorm
    ref = torch.stack([F.batch_norm(row[:, None], None, None, training=True, eps=1e-5)[0, 0]
                       for row in x])
    with no_torch_norms():
        r = W.batch_statistics_spread(5, num_batches=50, seed=2)
    torch.testing.assert_close(r["x_hat_batch"], ref)
    torch.testing.assert_close(r["batch_mean"], x.mean(1))
    torch.testing.assert_close(r["batch_std"], x.std(1, unbiased=False))


def test_batch_of_two_normalises_to_plus_minus_one():
    r = W.batch_statistics_spread(2, num_batches=500, eps=0.0)
    torch.testing.assert_close(r["x_hat_batch"].abs(), torch.ones(500, dtype=torch.float64))


@pytest.mark.parametrize("kwargs, match", [
    ({"batch_size": 1}, "batch_size must be an integer >= 2"),
    ({"batch_size": 4.0}, "batch_size must be an integer"),
    ({"batch_size": 4, "num_batches": 1}, "num_batches"),
    ({"batch_size": 4, "std": 0.0}, "std must be a positive"),
    ({"batch_size": 4, "eps": -1.0}, "eps must be >= 0"),
])
def test_batch_statistics_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        W.batch_statistics_spread(**kwargs)


def test_bn_explorer_slider_updates_image_and_readout():
    e = W.bn_noise_explorer()
    assert repr(e) == ("Explorer: batch size vs BatchNorm's batch statistics (needs a running kernel)"
                       " / 交互探索：批大小与 BatchNorm 的批统计量（需要运行中的内核）")
    before = e.image.value
    e.controls["batch_size"].value = 32
    assert e.image.value != before
    vals = _numbers(e.readout.value)
    assert vals[0] == "32"
    measured, theory = (float(v) for v in vals[1].split(" / "))
    assert theory == pytest.approx(1 / math.sqrt(32), abs=5e-4)
    assert measured == pytest.approx(1 / math.sqrt(32), rel=0.06)
    with pytest.raises(ValueError, match="batch_size must be one of"):
        W.bn_noise_explorer(5)


# ---- lesson 02: LayerNorm's eps ---------------------------------------------------------------

@pytest.mark.parametrize("s, eps", [(1.0, 1e-5), (1e-3, 1e-5), (3.1622776601683794e-3, 1e-5),
                                    (1e-4, 1e-8), (1e-2, 0.0)])
def test_layer_norm_shrinkage_matches_formula_and_torch(s, eps, no_torch_norms):
    with no_torch_norms():
        r = W.layer_norm_shrinkage(s, eps)
    assert r["theory"] == pytest.approx(s / math.sqrt(s * s + eps), rel=1e-12)
    assert r["output_std"] == pytest.approx(s / math.sqrt(s * s + eps), rel=1e-9)
    torch.testing.assert_close(r["output"], F.layer_norm(r["input"], (64,), eps=eps))
    std = r["input"].std(-1, unbiased=False)
    torch.testing.assert_close(std, torch.full_like(std, s))


def test_layer_norm_shrinkage_hand_values():
    # the lesson's case: s = 1e-3, eps = 1e-5 -> 1e-3 / sqrt(1.1e-5) = 0.30151
    assert W.layer_norm_shrinkage(1e-3, 1e-5)["output_std"] == pytest.approx(0.301511, abs=1e-6)
    # s = sqrt(eps): 1/sqrt(2)
    assert W.layer_norm_shrinkage(1e-3, 1e-6)["output_std"] == pytest.approx(0.707107, abs=1e-6)


@pytest.mark.parametrize("kwargs, match", [
    ({"input_std": 0.0}, "input_std must be a positive"),
    ({"input_std": 1.0, "eps": -1e-5}, "eps must be a finite number >= 0"),
    ({"input_std": 1.0, "d": 1}, "d must be an integer >= 2"),
])
def test_layer_norm_shrinkage_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        W.layer_norm_shrinkage(**kwargs)


def test_ln_explorer_sliders_update_image_and_readout():
    e = W.ln_eps_explorer()
    assert repr(e).startswith("Explorer: eps vs LayerNorm on small-variance tokens (needs a running kernel)")
    assert _numbers(e.readout.value)[2] == "0.3015 / 0.3015"
    before = e.image.value
    e.controls["eps"].value = 1e-6  # s = sqrt(eps): 1/sqrt(2)
    assert e.image.value != before
    assert _numbers(e.readout.value)[2] == "0.7071 / 0.7071"
    e.controls["input_std"].value = 1.0
    assert _numbers(e.readout.value)[2] == "1.0000 / 1.0000"
    with pytest.raises(ValueError, match="eps must be a positive"):
        W.ln_eps_explorer(eps=0.0)


# ---- lesson 03: GroupNorm's groups --------------------------------------------------------------

def test_divisors():
    assert W.divisors(12) == [1, 2, 3, 4, 6, 12]
    assert W.divisors(7) == [1, 7]
    with pytest.raises(ValueError, match="n must be an integer >= 1"):
        W.divisors(0)


@pytest.mark.parametrize("g", [1, 2, 3, 4, 6, 12])
def test_group_norm_channels_matches_torch(g, no_torch_norms):
    x = torch.randn(3, 12, 5, 4, dtype=torch.float64) * 2 + 0.5
    ref = F.group_norm(x, g, eps=1e-5)
    ln, inn = F.layer_norm(x, x.shape[1:], eps=1e-5), F.instance_norm(x, eps=1e-5)
    with no_torch_norms():
        r = W.group_norm_channels(x, g)
    torch.testing.assert_close(r["output"], ref)
    if g == 1:
        torch.testing.assert_close(r["output"], ln)
    if g == 12:
        torch.testing.assert_close(r["output"], inn)
    assert r["group_size"] == (12 // g) * 5 * 4
    assert r["group"].tolist() == [c // (12 // g) for c in range(12)]
    # hand-computed per-channel readouts of the output
    flat = ref.reshape(3, 12, -1)
    torch.testing.assert_close(r["channel_mean"], flat.mean(-1))
    torch.testing.assert_close(r["channel_std"], flat.std(-1, unbiased=False))


def test_group_norm_channels_bad_arguments():
    with pytest.raises(ValueError, match="12 channels do not split into 5 groups"):
        W.group_norm_channels(torch.randn(1, 12, 2, 2), 5)
    with pytest.raises(ValueError, match=r"expected an \(N, C, \*\) input"):
        W.group_norm_channels(torch.randn(12), 3)
    with pytest.raises(ValueError, match="num_groups must be an integer >= 1"):
        W.group_norm_channels(torch.randn(1, 12, 2), 0)


def test_group_norm_explorer_slider_and_special_cases():
    e = W.group_norm_explorer()
    assert repr(e) == ("Explorer: number of groups G in GroupNorm (C = 12) (needs a running kernel)"
                       " / 交互探索：GroupNorm 的组数 G（C = 12）（需要运行中的内核）")
    assert e.controls["num_groups"].options == (1, 2, 3, 4, 6, 12)
    before = e.image.value
    e.controls["num_groups"].value = 1
    assert e.image.value != before
    vals = _numbers(e.readout.value)
    assert vals[:4] == ["1, 12", str(12 * 16), "< 1e-12", "< 1e-12"]
    assert "F.layer_norm" in e.readout.value and "F.instance_norm" not in e.readout.value
    e.controls["num_groups"].value = 12
    vals = _numbers(e.readout.value)
    assert vals[:4] == ["12, 1", "16", "< 1e-12", "< 1e-12"]
    assert "F.instance_norm" in e.readout.value
    assert vals[4].startswith("0.000")  # every channel has mean 0 under InstanceNorm
    with pytest.raises(ValueError, match="num_groups must divide num_channels = 12"):
        W.group_norm_explorer(5)


# ---- lesson 04: RMSNorm and the token mean ----------------------------------------------------

@pytest.mark.parametrize("m", [0.0, 0.5, 2.0, 7.75])
def test_rms_mean_offset_matches_torch_and_formula(m, no_torch_norms):
    with no_torch_norms():
        r = W.rms_mean_offset(m, eps=1e-6)
    a = r["input"]
    torch.testing.assert_close(r["rms"], F.rms_norm(a, (64,), eps=1e-6))
    torch.testing.assert_close(r["ln"], F.layer_norm(a, (64,), eps=1e-6))
    torch.testing.assert_close(a.mean(-1), torch.full((256,), m, dtype=torch.float64))
    denom = math.sqrt(1 + m * m + 1e-6)
    assert r["rms_std"] == pytest.approx(1 / denom, rel=1e-9)
    assert r["rms_mean"] == pytest.approx(m / denom, abs=1e-9)
    assert r["ln_std"] == pytest.approx(1 / math.sqrt(1 + 1e-6), rel=1e-9)
    assert r["ln_mean"] == pytest.approx(0.0, abs=1e-9)


def test_rms_equals_layer_norm_at_zero_mean():
    r = W.rms_mean_offset(0.0)
    torch.testing.assert_close(r["rms"], r["ln"])
    # hand value: m = 2 -> std 1/sqrt(5) = 0.44721
    assert W.rms_mean_offset(2.0, eps=0.0)["rms_std"] == pytest.approx(0.447214, abs=1e-6)


@pytest.mark.parametrize("kwargs, match", [
    ({"mean_offset": float("nan")}, "mean_offset must be a finite number"),
    ({"mean_offset": 1.0, "eps": -1.0}, "eps must be a finite number >= 0"),
    ({"mean_offset": 1.0, "tokens": 0}, "tokens must be an integer >= 1"),
])
def test_rms_mean_offset_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        W.rms_mean_offset(**kwargs)


def test_rms_explorer_slider_updates_image_and_readout():
    e = W.rms_mean_explorer()
    assert repr(e).startswith("Explorer: token mean vs RMSNorm and LayerNorm (needs a running kernel)")
    assert _numbers(e.readout.value)[1] == "0.4472 / 0.4472"
    before = e.image.value
    e.controls["mean_offset"].value = 0.0
    assert e.image.value != before
    vals = _numbers(e.readout.value)
    assert vals[1] == "1.0000 / 1.0000" and vals[2] == "0.0000 / 0.0000"
    e.controls["mean_offset"].value = 3.0  # 1/sqrt(10) = 0.3162, 3/sqrt(10) = 0.9487
    vals = _numbers(e.readout.value)
    assert vals[1] == "0.3162 / 0.3162" and vals[2] == "0.9487 / 0.9487"
    with pytest.raises(ValueError, match="mean_offset must be between 0 and 8"):
        W.rms_mean_explorer(9.0)


# ---- lesson 05: Post-LN vs Pre-LN gradient norms ---------------------------------------------

@pytest.mark.parametrize("num_layers", [1, 3])
def test_init_gradient_profile_matches_direct_autograd(num_layers):
    prof = W.init_gradient_profile(num_layers, d_model=16, n_heads=2, seq_len=8, batch_size=2,
                                   vocab_size=16, seed=3)
    for position in ("post", "pre"):
        torch.manual_seed(3)
        model = HT.TinyTransformer(16, 16, n_heads=2, num_layers=num_layers, max_len=8,
                                   norm_position=position)
        x = HT.markov_tokens(2, 9, 16, torch.Generator().manual_seed(1003))
        logits = model(x[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 16), x[:, 1:].reshape(-1))
        weights = [b.ffn.fc2.weight for b in model.blocks]
        grads = torch.autograd.grad(loss, weights)
        expected = [float(g.pow(2).sum().sqrt()) for g in grads]
        assert prof[position] == pytest.approx(expected, rel=1e-5)
        assert len(prof[position]) == num_layers


def test_init_gradient_profile_leaves_global_rng_alone():
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    W.init_gradient_profile(2, seed=7)
    torch.testing.assert_close(torch.rand(3), expected)


def test_init_gradient_profile_bad_arguments():
    with pytest.raises(ValueError, match="num_layers must be an integer >= 1"):
        W.init_gradient_profile(0)
    with pytest.raises(ValueError, match="not divisible by n_heads"):
        W.init_gradient_profile(2, d_model=30, n_heads=4)


def test_pre_post_explorer_slider_updates_image_and_readout():
    e = W.pre_post_ln_explorer(2)
    assert repr(e) == ("Explorer: depth vs gradient norms of Post-LN and Pre-LN (needs a running kernel)"
                       " / 交互探索：深度与 Post-LN、Pre-LN 的梯度范数（需要运行中的内核）")
    before = e.image.value
    e.controls["num_layers"].value = 4
    assert e.image.value != before
    vals = _numbers(e.readout.value)
    assert vals[0] == "4"
    profs = [W.init_gradient_profile(4, seed=s) for s in (0, 1, 2)]
    for text, key in zip(vals[1:], ("post", "pre")):
        mean = [sum(p[key][i] for p in profs) / 3 for i in range(4)]
        first, last, ratio = (float(v) for v in text.split(", "))
        assert first == pytest.approx(mean[0], abs=6e-4)
        assert last == pytest.approx(mean[-1], abs=6e-4)
        assert ratio == pytest.approx(mean[-1] / mean[0], abs=6e-3)
    with pytest.raises(ValueError, match="seeds must name at least one seed"):
        W.pre_post_ln_figure(3, seeds=())
    with pytest.raises(ValueError, match="num_layers must be an integer from 1 to 24"):
        W.pre_post_ln_explorer(25)


def test_depth_explorer_shows_what_lesson_05_asks():
    """Lesson 05's explorer asks the reader to predict two things; with the explorer's own
    model and seeds (mean of 3) they must hold: Pre-LN's last-layer gradient shrinks as L
    grows, and Pre-LN's profile falls toward the output while Post-LN's does not."""
    import numpy as np

    from helpers.widgets import init_gradient_profile

    def mean_profile(L, key):
        return np.mean([init_gradient_profile(L, seed=s)[key] for s in (0, 1, 2)], axis=0)

    pre_last = [mean_profile(L, "pre")[-1] for L in (1, 12, 24)]
    assert pre_last[0] > pre_last[1] > pre_last[2]
    for L in (12, 24):
        pre, post = mean_profile(L, "pre"), mean_profile(L, "post")
        assert pre[-1] / pre[0] < 1 < post[-1] / post[0]


# ---- the starting figure as an ordinary output ---------------------------------------------

def _shown(explorer, monkeypatch) -> list[dict]:
    """The bundles that showing ``explorer`` in a notebook publishes, in order."""
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display",
                        lambda obj, raw=False, **kw: shown.append(obj if raw else {"object": obj}))
    explorer._ipython_display_()
    return shown


@pytest.mark.parametrize("make, draw", [
    (W.bn_noise_explorer, W.bn_noise_figure),
    (W.group_norm_explorer, W.group_norm_figure),
    (lambda: W.pre_post_ln_explorer(3), lambda: W.pre_post_ln_figure(3)),
])
def test_explorer_is_one_output_the_widget_with_its_starting_figure(make, draw, monkeypatch):
    """One bundle: the widget view (shown by a front end with a kernel, the figure once, in
    the widget), the PNG of its figure (shown where the widget cannot be: a saved lesson not
    yet run, the static editions) and its one-line text."""
    import base64

    e = make()
    (bundle,) = _shown(e, monkeypatch)
    assert set(bundle) == {"application/vnd.jupyter.widget-view+json", "image/png", "text/plain"}
    # the picture: the PNG of the figure function at the starting values, drawn independently
    assert base64.b64decode(bundle["image/png"]) == W.figure_png(draw()[0])
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == e.model_id
    assert bundle["text/plain"] == repr(e)[:110] + ("…" if len(repr(e)) > 110 else "")


def test_explorer_picture_follows_the_slider(monkeypatch):
    import base64

    e = W.group_norm_explorer()
    e.controls["num_groups"].value = 4
    (bundle,) = _shown(e, monkeypatch)
    assert base64.b64decode(bundle["image/png"]) == W.figure_png(W.group_norm_figure(4)[0])


@pytest.mark.parametrize("make", [W.ln_eps_explorer, W.rms_mean_explorer])
def test_explorers_whose_lesson_shows_the_figure_above_show_only_the_widget(make, monkeypatch):
    (only,) = _shown(make(), monkeypatch)
    assert set(only) == {"application/vnd.jupyter.widget-view+json", "text/plain"}


EXPLORER_CALL = __import__("re").compile(r"\b\w+_explorer\(")


# lessons whose saved outputs were made before explorers became one output and tools.bench
# stopped saving widgets; each passes once the lesson is re-executed (make execute)
NOT_YET_REEXECUTED: set[str] = set()
LESSONS = sorted((__import__("pathlib").Path(__file__).resolve().parent.parent / "notebooks")
                 .glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_stored_explorer_cells_hold_one_picture_and_no_widget(path, request):
    """In the committed lessons no output holds a widget view and no notebook holds widget
    state (tools.bench.saved_without_widgets): opened before it is run, a lesson shows each
    explorer's starting figure once, not a second copy inside a disconnected widget. Every
    explorer cell holds exactly one picture, except in lessons 02 and 04, where the cell
    before it holds the figure and the explorer cell says that it needs a kernel."""
    import nbformat

    if path.stem in NOT_YET_REEXECUTED:
        request.applymarker(pytest.mark.xfail(strict=True, reason="saved before the change"))
    view = "application/vnd.jupyter.widget-view+json"
    nb = nbformat.read(path, as_version=4)
    assert "widgets" not in nb.metadata, f"{path.name} holds saved widget state"
    cells = [c for c in nb.cells if c.cell_type == "code"]
    for k, cell in enumerate(cells):
        datas = [o.get("data", {}) for o in cell.get("outputs", [])]
        assert not any(view in d for d in datas), f"{path.name}: code cell {k} holds a widget view"
        if not EXPLORER_CALL.search(cell.source):
            continue
        pictures = sum("image/png" in d for d in datas)
        if path.name[:2] in ("02", "04"):
            assert pictures == 0 and any("needs a running kernel" in str(d.get("text/plain"))
                                         for d in datas), f"{path.name}: explorer cell {k}"
            assert any("image/png" in o.get("data", {}) for o in cells[k - 1].get("outputs", []))
        else:
            assert pictures == 1, f"{path.name}: explorer cell {k} shows {pictures} pictures"


def test_lessons_01_to_05_each_have_an_explorer():
    found = [p.name[:2] for p in LESSONS
             if EXPLORER_CALL.search(p.read_text(encoding="utf-8"))]
    assert found == ["01", "02", "03", "04", "05"], found


def test_saved_without_widgets_drops_views_and_state():
    import nbformat

    from tools.bench import saved_without_widgets

    view = "application/vnd.jupyter.widget-view+json"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outputs=[
        nbformat.v4.new_output("display_data", data={view: {"model_id": "a"}, "image/png": "iVBOR",
                                                     "text/plain": "Explorer"})])])
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    assert saved_without_widgets(nb) == 1
    assert "widgets" not in nb.metadata
    assert set(nb.cells[0].outputs[0].data) == {"image/png", "text/plain"}
