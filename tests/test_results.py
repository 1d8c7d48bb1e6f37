"""helpers.results (results files with their provenance) and helpers.grids (the long training
grids behind lessons 01, 05 and 06), and the committed results files themselves."""

import json
import math

import pytest
import torch

from helpers import grids, results
from helpers import transformer as HT


@pytest.fixture
def tmp_results(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    return tmp_path


def test_write_then_read_keeps_rows_and_provenance(tmp_results, monkeypatch):
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    rows = [{"seed": 0, "accuracy": 0.5}, {"seed": 1, "accuracy": 1.0}]
    path = results.write_results("demo", rows, seeds=[0, 1], argv=["warmup", "--seeds", "0", "1"],
                                 module="helpers.grids", lr=3e-3)
    assert path == tmp_results / f"demo.{results.cpu_path()}.json"
    record = results.read_results("demo")
    assert record["rows"] == rows
    assert record["torch"] == torch.__version__
    assert record["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert record["command"] == ("ATEN_CPU_CAPABILITY=default python -m helpers.grids warmup "
                                 "--seeds 0 1")
    assert record["seeds"] == [0, 1] and record["settings"] == {"lr": 3e-3}
    assert json.loads(path.read_text())["name"] == "demo"


def test_read_all_paths_and_errors(tmp_results):
    for path, acc in (("avx2", 0.9), ("default", 0.1)):
        (tmp_results / f"g.{path}.json").write_text(json.dumps({"rows": [{"accuracy": acc}]}))
    records = results.read_all_paths("g")
    assert {p: r["rows"][0]["accuracy"] for p, r in records.items()} == {"avx2": 0.9, "default": 0.1}
    assert results.read_results("g", "default")["rows"][0]["accuracy"] == 0.1
    with pytest.raises(FileNotFoundError, match="no results file for 'missing'"):
        results.read_all_paths("missing")
    with pytest.raises(ValueError, match="plain word"):
        results.result_path("../escape")


def test_outcome_thresholds():
    assert [grids.outcome(a) for a in (0.99, 0.951, 0.95, 0.5, 0.25, 0.249, 0.0)] == [
        "trains", "trains", "partial", "partial", "partial", "fails", "fails"]


def test_deepnorm_halves_have_the_intended_alpha_and_beta():
    alpha, beta = (24 ** 0.25, 96 ** -0.25)  # DeepNet Table 1, decoder-only, M = 12
    xavier = lambda w: math.sqrt(2 / sum(w.shape))  # noqa: E731
    for kind, want_alpha, want_beta in [("deepnorm", alpha, beta), ("alpha only", alpha, 1.0),
                                        ("beta only", 1.0, beta), ("post", 1.0, 1.0)]:
        model = grids.deepnorm_model(kind, 12, seed=0)
        assert all(b.alpha == pytest.approx(want_alpha) for b in model.blocks), kind
        ratio = torch.tensor([b.ffn.fc1.weight.std().item() / xavier(b.ffn.fc1.weight)
                              for b in model.blocks]).mean().item()
        assert ratio == pytest.approx(want_beta, rel=0.05), kind
    assert grids.deepnorm_model("pre", 12, 0).final_norm is not None
    with pytest.raises(ValueError, match="kind must be one of"):
        grids.deepnorm_model("alpha on branch", 12, 0)


def test_warmup_run_is_lesson_05s_training():
    """The grid's run equals the lesson's own call of train_reversal (same seeds, same model)."""
    torch.set_num_threads(1)
    config = dict(grids.WARMUP_CONFIG, steps=3)
    torch.manual_seed(1)
    model = HT.TinyTransformer(config["vocab_size"], d_model=64, n_heads=4, num_layers=6,
                               max_len=2 * config["seq_len"], norm_position="post")
    expected = HT.train_reversal(model, lr=3e-3, warmup_steps=2, seed=1, **config)
    old = dict(grids.WARMUP_CONFIG)
    try:
        grids.WARMUP_CONFIG["steps"] = 3
        got = grids.warmup_run("post", 3e-3, 2, seed=1)
    finally:
        grids.WARMUP_CONFIG.clear()
        grids.WARMUP_CONFIG.update(old)
    assert got == {"accuracy": expected["accuracy"], "final_loss": expected["final_loss"]}


def test_warmup_summary_counts_runs_over_seeds_and_paths():
    row = lambda acc, seed: {"position": "post", "lr": 3e-3, "warmup": 0, "seed": seed,  # noqa: E731
                             "accuracy": acc, "outcome": grids.outcome(acc)}
    records = {"avx2": {"rows": [row(0.1, 0), row(0.99, 1)]},
               "default": {"rows": [row(0.5, 0), row(0.98, 1)]}}
    cell = grids.warmup_summary(records)["post", 3e-3, 0]
    assert (cell["trains"], cell["fails"], cell["partial"], cell["runs"]) == (2, 1, 1, 4)
    assert (cell["min"], cell["max"]) == (0.1, 0.99)


@pytest.mark.parametrize("name,grid", [
    ("warmup_grid", {"position", "lr", "warmup", "seed"}),
    ("deepnorm_grid", {"kind", "layers", "seed"}),
    ("batch_size_grid", {"norm", "batch_size", "seed"}),
])
def test_committed_results_files_are_complete_and_consistent(name, grid):
    records = results.read_all_paths(name)
    assert {"avx2", "default"} <= set(records), "one file per CPU path the lessons compare"
    for path, record in records.items():
        assert record["command"].startswith(("python -m helpers.", "ATEN_CPU_CAPABILITY="))
        assert record["torch"].startswith("2.13.0") and record["cpu_capability"].lower() == path
        keys = [tuple(r[k] for k in sorted(grid)) for r in record["rows"]]
        assert len(keys) == len(set(keys)), "each run once"
        assert {r["seed"] for r in record["rows"]} == set(record["seeds"])
        for r in record["rows"]:
            if "outcome" in r:
                assert r["outcome"] == grids.outcome(r["accuracy"])


@pytest.mark.parametrize("workers", [1, 2])
def test_reversal_runs_are_the_lessons_loop(workers):
    """grids.reversal_runs against the loop lessons 05 and 06 ran before: the same results and
    weights bit for bit, in the loop's order, and the same global RNG state afterwards."""
    torch.set_num_threads(1)
    config = dict(steps=3, lr=3e-3, batch_size=4, seq_len=4, vocab_size=8, eval_size=16,
                  log_every=1)
    model_kwargs = dict(vocab_size=8, d_model=16, n_heads=2, max_len=8)
    runs = {("post", 0): (dict(model_kwargs, num_layers=2, norm_position="post"), 0,
                          dict(warmup_steps=2)),
            ("pre", 1): (dict(model_kwargs, num_layers=1, norm_position="pre"), 1),
            ("deepnorm", 1): (dict(model_kwargs, num_layers=3, norm_position="deepnorm"), 1)}
    expected = {}
    for key, (kwargs, seed, *extra) in runs.items():
        torch.manual_seed(seed)
        model = HT.TinyTransformer(**kwargs)
        expected[key] = (HT.train_reversal(model, seed=seed, **config, **(extra[0] if extra else {})),
                         model)
    state = torch.get_rng_state()
    results, models = grids.reversal_runs(runs, config, workers=workers)
    assert torch.equal(torch.get_rng_state(), state)
    assert list(results) == list(runs) == list(models)
    for key, (result, model) in expected.items():
        assert results[key] == result
        assert not models[key].training
        for a, b in zip(models[key].state_dict().values(), model.state_dict().values()):
            assert torch.equal(a, b), key
