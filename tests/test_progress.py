"""helpers.progress: one final line in saved outputs, live updates in a kernel."""

import nbformat
import pytest
from nbclient import NotebookClient

from helpers.progress import Progress


def test_outside_a_notebook_prints_only_the_final_line(capsys):
    bar = Progress("run", total=4, width=8, label_width=5)
    assert not bar.live
    for step in range(1, 5):
        bar.update(step)
        if step == 2:
            assert bar.line() == "run   [####    ]"
    assert capsys.readouterr().out == ""
    assert bar.close("loss 0.10") == "run   [########] loss 0.10"
    assert capsys.readouterr() == ("run   [########] loss 0.10\n", "")


def test_rejects_bad_sizes_and_clamps_progress():
    with pytest.raises(ValueError, match="total and width must be >= 1"):
        Progress("x", total=0)
    bar = Progress("x", total=3, width=3, label_width=1)
    bar.update(10)
    assert bar.line() == "x [###]"
    bar.update(-2)
    assert bar.line() == "x [   ]"


def _outputs_in_a_kernel(code: str) -> list:
    """The outputs that a saved notebook keeps of one code cell running ``code``."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("from helpers.progress import Progress\n" + code)]
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    return nb.cells[0].outputs


def test_in_a_kernel_the_saved_notebook_keeps_one_final_line():
    outputs = _outputs_in_a_kernel(
        "bar = Progress('train', total=50, width=10, label_width=6)\n"
        "for i in range(50):\n    bar.update(i + 1)\n"
        "_ = bar.close('done')")
    assert len(outputs) == 1 and outputs[0].output_type == "display_data"
    assert outputs[0].data["text/plain"] == "train  [##########] done"


def test_a_scripts_grid_prints_one_line_per_noted_step(capsys):
    bar = Progress("runs", total=12, live=False, steps_to_stdout=True)
    bar.update(1, "batch 32 seed 0: eval error 1.8%")
    bar.update(2)  # no note: nothing printed
    bar.update(12, "group batch 2 seed 1: eval error 2.8%")
    assert capsys.readouterr().out == ("[ 1/12] batch 32 seed 0: eval error 1.8%\n"
                                       "[12/12] group batch 2 seed 1: eval error 2.8%\n")
    bar.close("12 runs")
    assert capsys.readouterr().out.endswith("] 12 runs\n")


def test_in_a_kernel_a_noted_grid_also_keeps_one_final_line():
    outputs = _outputs_in_a_kernel(
        "bar = Progress('runs', total=3, width=3, label_width=4, steps_to_stdout=True)\n"
        "for i in range(3):\n    bar.update(i + 1, f'run {i}')\n"
        "_ = bar.close('3 runs')")
    assert len(outputs) == 1 and outputs[0].data["text/plain"] == "runs [###] 3 runs"
