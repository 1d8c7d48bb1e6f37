"""Formatting for numbers that notebooks print and nbval compares.

Differences at the level of floating-point rounding depend on the thread count and the CPU
(the order of a sum changes its last bits), so the lessons print them as a bound,
``< 1e-12``, rather than as digits that would differ from one machine to the next.
"""

from __future__ import annotations

__all__ = ["bound"]


def bound(value, floor: float = 1e-12, digits: int = 1) -> str:
    """``"< floor"`` when ``value`` is below ``floor`` (rounding noise), else ``value`` in
    scientific notation with ``digits`` decimals.

    >>> bound(8.9e-16), bound(2.3e-3), bound(3e-8, floor=1e-5)
    ('< 1e-12', '2.3e-03', '< 1e-05')

    Lessons 01, 02, 03, 04, 05, 06, 07, 08, 12.
    """
    value = float(value.detach()) if hasattr(value, "detach") else float(value)  # tensors too
    if value != value:  # NaN
        return "nan"
    return f"< {floor:.0e}" if abs(value) < floor else f"{value:.{digits}e}"
