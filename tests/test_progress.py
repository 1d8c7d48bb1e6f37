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


def test_in_a_kernel_the_saved_notebook_keeps_one_final_line():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "from helpers.progress import Progress\n"
        "bar = Progress('train', total=50, width=10, label_width=6)\n"
        "for i in range(50):\n    bar.update(i + 1)\n"
        "_ = bar.close('done')")]
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    outputs = nb.cells[0].outputs
    assert len(outputs) == 1 and outputs[0].output_type == "display_data"
    assert outputs[0].data["text/plain"] == "train  [##########] done"
