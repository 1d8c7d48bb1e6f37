"""The course's shared library.

- :mod:`helpers.functional`: from-scratch ``batch_norm``, ``instance_norm``, ``layer_norm``,
  ``group_norm``, ``rms_norm`` with the signatures and semantics of ``torch.nn.functional``.
- :mod:`helpers.norms`: drop-in modules with torch's class names, parameters and buffers.
- :mod:`helpers.backward`: hand-derived backward passes, checked against autograd.
- :mod:`helpers.checks`: exercise checkers that name the mistake a learner made.
- :mod:`helpers.plotting`, :mod:`helpers.figures`, :mod:`helpers.experiments`: the course's
  figure style (with a bundled CJK font), the figures, and the small experiments.
- :mod:`helpers.display`: printing rounding-level numbers as bounds, so outputs reproduce.
- :mod:`helpers.bench`: execute and time the notebooks; :mod:`helpers.bench_norms`: time the
  normalisation kernels against a copy (`make bench-norms`).
- :mod:`helpers.flashcards`: the interview questions as Anki flashcards (`make flashcards`).
- :mod:`helpers.weight_norms`: normalising the weights (WeightNorm, Weight Standardisation,
  spectral norm) and lesson 11's experiment; :mod:`helpers.checks_weight_norms`: its checkers.
- :mod:`helpers.distributed`: synchronised BatchNorm on ``torch.distributed`` (gloo, CPU) and
  a launcher for local worker processes (imported on its own: ``from helpers import distributed``).
"""

from . import backward, checks, functional, norms

__all__ = ["functional", "norms", "backward", "checks"]
__version__ = "0.1.0"
