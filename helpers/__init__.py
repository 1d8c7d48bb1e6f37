"""The course's shared library: what the notebooks import, and nothing else (the build tooling
lives in ``tools/``). Each module, with the lessons that use it:

- :mod:`helpers.functional`: from-scratch ``batch_norm``, ``instance_norm``, ``layer_norm``,
  ``group_norm``, ``rms_norm`` with the signatures and semantics of ``torch.nn.functional``,
  and the course's one mean/variance code (``centred_moments``, ``merge_moments``).
  Lessons 02 to 04, 07, 08.
- :mod:`helpers.norms`: drop-in modules with torch's class names, parameters and buffers.
  Lessons 00, 01, 04.
- :mod:`helpers.backward`: hand-derived backward passes, checked against autograd.
  Lessons 01 to 04, 12.
- :mod:`helpers.checks`: every exercise checker, one contract (a bilingual ``CheckResult``),
  imported on its own (``from helpers.checks import check_layer_norm``): no other module of
  the library imports a checker, and ``python -m tools.grader_audit`` runs them on a bank of
  wrong and right solutions. Lessons 00 to 08, 12, 13.
- :mod:`helpers.drills`: the drills (forward and backward passes, running statistics,
  folding, the SyncBN merge), graded from scratch, and their model solutions. Lesson 12.
- :mod:`helpers.mock_interview`: every lesson's questions with their rubrics, weighted by how often
  public interview collections ask them; a mock interview with a countdown widget, and the list
  of the most asked. Lesson 12.
- :mod:`helpers.spot_the_bug`: eight real bugs in public normalisation code, each cited to its
  issue or pull request, reproduced against the correct version and set as a drill (checkers
  in :mod:`helpers.checks.spot_the_bug`). Lesson 12.
- :mod:`helpers.plotting`, :mod:`helpers.figures`, :mod:`helpers.experiments`: the course's
  figure style (with a bundled CJK font), the figures, and the small experiments.
  Every lesson (style); lessons 00 to 04.
- :mod:`helpers.widgets`: the lecture explorers (sliders that redraw a figure). Lessons 01 to 05.
- :mod:`helpers.transformer`: a tiny Transformer with Post-LN, Pre-LN and DeepNorm blocks, and
  the layouts of today's models (LLaMA, Gemma 2, OLMo 2, Peri-LN), QK-norm, LayerScale and
  SkipInit. Lessons 05, 06, 09, 12. :mod:`helpers.transformer_figures`: lesson 09's figures.
- :mod:`helpers.grids`: the training grids too long for a lesson (``python -m helpers.grids``),
  and :mod:`helpers.results`: the results files they and ``python -m helpers.experiments``
  write to ``results/``. Lessons 01, 05, 06.
- :mod:`helpers.progress`: a one-line progress bar (live in a notebook, one final line in the
  saved output). Lessons 05, 06.
- :mod:`helpers.bn_practice`: BatchNorm in practice (dropout's variance shift, weight-decay
  groups, FrozenBatchNorm2d, Batch Renorm, ghost BatchNorm). Lesson 10.
- :mod:`helpers.weight_norms`: normalising the weights (WeightNorm, Weight Standardisation,
  spectral norm) and lesson 11's experiment. Lesson 11.
- :mod:`helpers.bench_norms`: memory traffic, timings and variance algorithms of the
  normalisation kernels (``make bench-norms``). Lesson 07.
- :mod:`helpers.kernels`: LayerNorm and RMSNorm as Triton kernels (forward, backward with a
  two-stage dW/dB reduction), run by Triton's interpreter on a CPU, and the PTX they compile
  to; :mod:`helpers.bench_kernels`: their timings on a CUDA GPU. Lessons 12, 13. (Importing
  ``helpers`` sets ``TRITON_INTERPRET=1`` where there is no CUDA, before anything else can
  import Triton.)
- :mod:`helpers.atlas`: the methods of lesson 14 that no other lesson builds (FRN, EvoNorm,
  Switchable and Batch-Instance Normalisation, whitening, PowerNorm, ScaleNorm, conditional
  norms, adaLN-Zero, Mix-LN, LayerNorm Scaling, LRN) and the lesson's map. Lesson 14.
- :mod:`helpers.distributed`: synchronised BatchNorm on ``torch.distributed`` (gloo, CPU) and
  a launcher for local worker processes (imported on its own: ``from helpers import
  distributed``). Lesson 08.
- :mod:`helpers.fold`: folding an eval-mode BatchNorm into the layer before it. Lessons 01, 07, 12.
- :mod:`helpers.training`: a minimal training loop. Lesson 01.
- :mod:`helpers.display`: printing rounding-level numbers as bounds, so outputs reproduce.
  Every lesson.
"""

import os as _os

import torch as _torch

# Triton decorates its own functions (tl.sum, ...) when it is first imported, and torch._dynamo
# imports it (an optimiser's step is enough): TRITON_INTERPRET must be set before that, or
# kernels fail in the interpreter on a machine without a CUDA GPU (helpers.kernels).
if "TRITON_INTERPRET" not in _os.environ and not _torch.cuda.is_available():
    _os.environ["TRITON_INTERPRET"] = "1"

from . import backward, functional, norms  # noqa: E402

__all__ = ["functional", "norms", "backward"]
__version__ = "0.1.0"
