"""A one-line progress bar for the lessons' training loops.

In a running notebook the line is one display output updated in place, so it moves while the
loop runs and the saved notebook (and the HTML and slide editions made from it) keeps only the
final line. Outside a notebook (a script, a test) nothing is printed until :meth:`Progress.close`,
which prints the final line once. stderr is never used: the committed notebooks keep it empty.

    bar = Progress("Post-LN, seed 0", total=100)
    for step in range(100):
        ...
        bar.update(step + 1)
    bar.close("loss 0.01  accuracy 1.00")

Used by :func:`helpers.transformer.train_reversal` (lessons 05 and 06) and the lessons' other
long loops: the grids of worker runs (:func:`helpers.experiments.batch_size_grid`, lesson 01;
:func:`helpers.weight_norms.variant_grid`, lesson 11) and lesson 10's experiments. A grid that a
script runs for minutes passes ``steps_to_stdout=True``: outside a notebook each
:meth:`Progress.update` with a ``note`` then prints ``[k/n] note``.
"""

from __future__ import annotations

__all__ = ["Progress", "in_notebook"]


def in_notebook() -> bool:
    """True inside a Jupyter kernel (where display outputs can be updated in place)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


class Progress:
    """``label [#####     ] suffix``: ``width`` characters of bar for ``total`` steps.

    Args:
        label: what is running, left-aligned in ``label_width`` characters.
        total: the number of steps (at least 1).
        width: characters of the bar.
        live: update a display in place (default: only inside a notebook).
        steps_to_stdout: when not live, print ``[k/n] note`` for each update that has a note
            (a script's long grid); otherwise only :meth:`close` prints.
        enabled: ``False`` shows and prints nothing (a caller's ``progress=False``).
    """

    def __init__(self, label: str, total: int, width: int = 20, label_width: int = 26,
                 live: bool | None = None, steps_to_stdout: bool = False,
                 enabled: bool = True) -> None:
        if total < 1 or width < 1:
            raise ValueError(f"total and width must be >= 1, got {total} and {width}")
        self.label, self.total, self.width, self.label_width = label, total, width, label_width
        self.steps_to_stdout, self.enabled = steps_to_stdout and enabled, enabled
        self.done, self._shown = 0, -1
        self.live = enabled and (in_notebook() if live is None else live)
        self._handle = None
        if self.live:
            from IPython.display import display

            self._handle = display(_Line(self.line()), display_id=True)

    def line(self, suffix: str = "") -> str:
        filled = self.done * self.width // self.total
        bar = "#" * filled + " " * (self.width - filled)
        return f"{self.label:<{self.label_width}s} [{bar}]" + (f" {suffix}" if suffix else "")

    def update(self, done: int, note: str = "") -> None:
        """Record ``done`` finished steps; a live bar redraws when it gains a character or
        when ``note`` (shown after the bar, e.g. the last finished run) is given."""
        self.done = max(0, min(done, self.total))
        filled = self.done * self.width // self.total
        if self._handle is not None and (filled != self._shown or note):
            self._shown = filled
            self._handle.update(_Line(self.line(note)))
        elif self._handle is None and self.steps_to_stdout and note:
            print(f"[{self.done:>{len(str(self.total))}}/{self.total}] {note}", flush=True)

    def step(self, note: str = "") -> None:
        """One more step finished (:meth:`update` with ``done + 1``)."""
        self.update(self.done + 1, note)

    def close(self, suffix: str = "") -> str:
        """Show the final line (bar full) with ``suffix``; print it when not live. Returns it."""
        self.done = self.total
        text = self.line(suffix)
        if self._handle is not None:
            self._handle.update(_Line(text))
        elif self.enabled:
            print(text, flush=True)
        return text


class _Line:
    """Plain text for IPython's display machinery (text/plain only, no HTML)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text
