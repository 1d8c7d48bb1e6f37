"""helpers.experiments, helpers.figures and tools.bench, against independent references:
the invariance table of Ba et al. (2016) and Zhang & Sennrich (2019), torch's own layers
(which elements an output depends on), and direct computation."""

import json
import math
import pathlib
import warnings

import pytest
import torch
import torch.nn.functional as F

from helpers import experiments, figures

# Ba et al. (2016), Table 1, and Zhang & Sennrich (2019), Table 1: True = invariant
PAPER = {
    "BatchNorm": [True, False, True, True, True, False],
    "LayerNorm": [True, True, False, True, False, True],
    "RMSNorm": [True, False, False, True, False, True],
}
NORMS = {
    "BatchNorm": lambda a: F.batch_norm(a, None, None, training=True, eps=1e-300),
    "LayerNorm": lambda a: F.layer_norm(a, a.shape[-1:], eps=0.0),
    "RMSNorm": lambda a: F.rms_norm(a, a.shape[-1:], eps=0.0),
}


@pytest.mark.parametrize("name", PAPER)
def test_invariance_differences_reproduce_the_papers(name):
    diffs = experiments.invariance_differences(NORMS[name])
    assert list(diffs) == experiments.INVARIANCES
    for (row, d), invariant in zip(diffs.items(), PAPER[name]):
        assert (d < 1e-9) == invariant, (row, d)
        if not invariant:
            assert d > 0.1, (row, d)


def test_invariance_differences_detect_a_norm_that_is_not_invariant():
    diffs = experiments.invariance_differences(lambda a: a)  # no normalisation at all
    assert all(d > 0.1 for d in diffs.values())


def test_deep_mlp_structure_and_initial_scale():
    model = experiments.deep_mlp(depth=5, width=64, gain=2.0, norm="layer", seed=1)
    linears = [m for m in model if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 6  # 5 hidden + the classifier
    assert sum(isinstance(m, torch.nn.Tanh) for m in model) == 5
    w = linears[2].weight.detach()  # 64 x 64: std should be gain / sqrt(fan_in) = 0.25
    assert abs(float(w.std()) - 2.0 / math.sqrt(64)) < 0.02
    with pytest.raises(ValueError, match="norm must be"):
        experiments.deep_mlp(norm="group")


def test_layer_statistics_match_a_manual_forward_and_backward():
    torch.manual_seed(0)
    model = experiments.deep_mlp(depth=3, width=16, in_features=8, num_classes=4, gain=1.5,
                                 norm="batch")
    x, y = torch.randn(32, 8, dtype=torch.float64), torch.randint(0, 4, (32,))
    stats = experiments.layer_statistics(model, x, y)
    # recompute by hand, layer by layer
    h, hidden = x, []
    for m in model:
        h = m(h)
        if isinstance(m, torch.nn.Tanh):
            h.retain_grad()
            hidden.append(h)
    F.cross_entropy(h, y).backward()
    assert len(stats.activations) == 3
    for a, ref in zip(stats.activations, hidden):
        torch.testing.assert_close(a, ref.detach().flatten())
    for g, ref in zip(stats.gradients, hidden):
        torch.testing.assert_close(g, ref.grad.flatten())
    assert stats.saturation == [float((t.abs() > 0.97).double().mean()) for t in stats.activations]


def test_digits_are_standardised_and_digit_images_are_raw():
    x, y = experiments.digits()
    assert x.shape == (1797, 64) and y.shape == (1797,)
    assert float(x.mean(0).abs().max()) < 1e-9
    images = experiments.digit_images([0, 5])
    assert images.shape == (2, 1, 8, 8) and float(images.min()) == 0.0 and float(images.max()) <= 1.0


@pytest.mark.parametrize("method", ["batch", "layer", "instance", "group"])
def test_statistics_mask_is_what_torch_depends_on(method):
    """The figure's shading: the elements one output depends on, found by autograd through
    torch's own layers."""
    n, c, hw, g = 3, 6, 4, 3
    layer = {"batch": torch.nn.BatchNorm1d(c), "layer": torch.nn.LayerNorm([c, hw]),
             "instance": torch.nn.InstanceNorm1d(c), "group": torch.nn.GroupNorm(g, c)}[method]
    for ref in [(0, 0, 0), (n - 1, c - 1, 2), (1, 2, 1)]:
        x = torch.randn(n, c, hw, requires_grad=True)
        layer(x)[ref].backward()
        assert torch.equal(x.grad != 0, figures.statistics_mask(method, (n, c, hw), ref, g))


def test_figures_draw_without_warnings(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for fig in [figures.norm_map(), figures.group_map(8, (1, 2, 8))]:
            fig.savefig(tmp_path / "f.png")
            plt.close(fig)
    with pytest.raises(ValueError, match="do not split"):
        figures.group_map(8, (3,))
    with pytest.raises(ValueError, match="unknown method"):
        figures.statistics_mask("weight", (2, 2, 2), (0, 0, 0))


def test_committed_norm_map_is_up_to_date(tmp_path):
    """images/norm_map.png is what helpers.figures draws today (pixels, not bytes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.image as mpimg
    import matplotlib.pyplot as plt

    from helpers.plotting import IMAGES_DIR, savefig

    fig = figures.norm_map()
    fresh = savefig(fig, "norm_map", directory=tmp_path)
    plt.close(fig)
    committed = mpimg.imread(IMAGES_DIR / "norm_map.png")
    new = mpimg.imread(fresh)
    assert committed.shape == new.shape, "regenerate with: python -m helpers.figures"
    assert float(abs(committed - new).mean()) < 1e-3, "regenerate with: python -m helpers.figures"


def test_bench_executes_and_times_a_notebook(tmp_path, capsys):
    """tools.bench runs a notebook in a fresh kernel, reports its time and (in place)
    writes the outputs back."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    from tools import bench

    path = tmp_path / "99_tiny.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell("print(6 * 7)")]), path)
    assert bench.main([str(path), "--execute-in-place", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "99_tiny.ipynb" in out and "ok" in out
    cell = json.loads(pathlib.Path(path).read_text())["cells"][0]
    assert cell["execution_count"] == 1 and "".join(cell["outputs"][0]["text"]) == "42\n"


def test_bench_experiments_times_both_and_compares_the_numbers(monkeypatch, capsys):
    """tools.bench_experiments: a row per experiment with both times, their ratio and whether
    the numbers agree; exit status 1 when they do not."""
    from tools import bench_experiments as BE

    import concurrent.futures

    # the two worker processes a lesson starts are not what this test checks: threads stand in
    monkeypatch.setattr(BE.experiments, "worker_pool",
                        lambda workers=2, **_: concurrent.futures.ThreadPoolExecutor(workers))
    monkeypatch.setattr(BE.experiments, "digits", lambda *a, **k: None)
    monkeypatch.setattr(BE, "EXPERIMENTS", {"same": lambda: (lambda: [1.0], lambda: [1.0]),
                                            "differs": lambda: (lambda: [1.0], lambda: [1.5])})
    assert BE.main(["same"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("same"))
    assert row.count(" s") == 4 and row.count("x") == 2 and row.endswith("yes")
    assert BE.main([]) == 1
    assert capsys.readouterr().out.splitlines()[-2].endswith("NO")
    with pytest.raises(SystemExit):
        BE.main(["nope"])
