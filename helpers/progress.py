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
long loops.
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
    """

    def __init__(self, label: str, total: int, width: int = 20, label_width: int = 26,
                 live: bool | None = None) -> None:
        if total < 1 or width < 1:
            raise ValueError(f"total and width must be >= 1, got {total} and {width}")
        self.label, self.total, self.width, self.label_width = label, total, width, label_width
        self.done, self._shown = 0, -1
        self.live = in_notebook() if live is None else live
        self._handle = None
        if self.live:
            from IPython.display import display

            self._handle = display(_Line(self.line()), display_id=True)

    def line(self, suffix: str = "") -> str:
        filled = self.done * self.width // self.total
        bar = "#" * filled + " " * (self.width - filled)
        return f"{self.label:<{self.label_width}s} [{bar}]" + (f" {suffix}" if suffix else "")

    def update(self, done: int) -> None:
        """Record ``done`` finished steps; redraws only when the bar gains a character."""
        self.done = max(0, min(done, self.total))
        filled = self.done * self.width // self.total
        if self._handle is not None and filled != self._shown:
            self._shown = filled
            self._handle.update(_Line(self.line()))

    def close(self, suffix: str = "") -> str:
        """Show the final line (bar full) with ``suffix``; print it when not live. Returns it."""
        self.done = self.total
        text = self.line(suffix)
        if self._handle is not None:
            self._handle.update(_Line(text))
        else:
            print(text, flush=True)
        return text


class _Line:
    """Plain text for IPython's display machinery (text/plain only, no HTML)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text
