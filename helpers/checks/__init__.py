r"""Every exercise checker of the course, with one contract.

A checker runs a learner's function on cases chosen to expose the mistakes that circulate,
compares each output with a reference (``torch.nn.functional``, a float64 computation, or
the course's own module), and returns a :class:`CheckResult` whose message, in English then
Chinese, names the mistake the function made. A checker never prints, never raises on the
learner's code (an exception in it is a diagnosis), and leaves the global random state as it
found it.

==============================  ====================================  ==========================
checker                         module                                lesson
==============================  ====================================  ==========================
:func:`check_batch_norm`        :mod:`helpers.checks.norms`           01, 12 (drill)
:func:`check_layer_norm`        :mod:`helpers.checks.norms`           00, 02, 12 (drill)
:func:`check_group_norm`        :mod:`helpers.checks.norms`           03, 12 (drill)
:func:`check_rms_norm`          :mod:`helpers.checks.norms`           04, 12 (drill)
:func:`check_block_forward`     :mod:`helpers.checks.transformer`     05, 06
:func:`check_variance`          :mod:`helpers.checks.variance`        07
:func:`check_merge`             :mod:`helpers.checks.sync_bn`         08
:func:`check_batch_norm_eval`   :mod:`helpers.checks.eval_bn`         12 (drill)
:func:`check_bn_backward`       :mod:`helpers.checks.backprop_drills` 12 (drill)
:func:`check_ln_backward`       :mod:`helpers.checks.backprop_drills` 12 (drill)
:func:`check_bn_running_stats`  :mod:`helpers.checks.backprop_drills` 12 (drill)
:func:`check_fold_bn`           :mod:`helpers.checks.backprop_drills` 12 (drill)
:func:`check_sync_bn_merge`     :mod:`helpers.checks.backprop_drills` 12 (drill)
:func:`check_qk_norm_attention` :mod:`helpers.checks.todays_transformers`  09
:func:`check_dyt_module`        :mod:`helpers.checks.todays_transformers`  09
:func:`check_weight_decay_groups`  :mod:`helpers.checks.bn_practice`  10
:func:`check_frozen_batch_norm` :mod:`helpers.checks.bn_practice`     10
:func:`check_batch_renorm`      :mod:`helpers.checks.bn_practice`     10
:func:`check_weight_norm`       :mod:`helpers.checks.weight_norms`    11
:func:`check_weight_norm_grad`  :mod:`helpers.checks.weight_norms`    11
:func:`check_power_iteration`   :mod:`helpers.checks.weight_norms`    11
:func:`check_rms_norm_kernel`   :mod:`helpers.checks.kernels`         13
:func:`check_layer_norm_backward_kernel`  :mod:`helpers.checks.kernels`  13
:func:`check_deepnorm_residual`  :mod:`helpers.checks.spot_the_bug`  12 (spot the bug)
:func:`check_makemore_batch_norm`  :mod:`helpers.checks.spot_the_bug`  12 (spot the bug)
:func:`check_running_var_update`  :mod:`helpers.checks.spot_the_bug`  12 (spot the bug)
:func:`check_residual_branches`  :mod:`helpers.checks.spot_the_bug`  12 (spot the bug)
:func:`check_checkpoint_norm`  :mod:`helpers.checks.spot_the_bug`  12 (spot the bug)
:func:`check_module_buffers`  :mod:`helpers.checks.spot_the_bug`  12 (spot the bug)
:func:`check_bf16_row_mean`  :mod:`helpers.checks.spot_the_bug`  12 (spot the bug)
:func:`check_rms_norm_rsqrt`  :mod:`helpers.checks.spot_the_bug`  12 (spot the bug)
==============================  ====================================  ==========================

Lesson 12's drills 11 to 15 (a gradient check, a BatchNorm module, GroupNorm's backward, DeepNorm's
initialisation, a Pre-LN stack) are graded by the checkers of :mod:`helpers.checks.interview_drills`,
which :mod:`helpers.drills` imports directly; drill 16 by :func:`check_switchable_norm`.

When no known mistake matches, a result shows the smallest failing case (its inputs, a few
expected and returned values, where they differ most) in both languages; an exception's text
is quoted as torch or Python wrote it. The bank of wrong and right learner solutions in
``tests/grader_bank`` proves every checker and drill: ``python -m tools.grader_audit`` (``make
audit-graders``, and ``tests/test_grader_audit.py`` in ``make test``) prints, per checker, the
wrong solutions rejected, those rejected with the right diagnosis, and the right ones accepted.
No other module of ``helpers`` imports this package.

A new checker is a list of :class:`Case`, a reference and a catalogue of :class:`Mistake`,
handed to :func:`run_cases` (:mod:`helpers.checks.engine`). :func:`helpers.checks.scratch.from_scratch`
wraps a learner's function so that calling torch's own implementation is diagnosed.

Usage::

    from helpers.checks import check_layer_norm

    def my_ln(x, weight, bias, eps):
        xf = x.float()
        mu = xf.mean(-1, keepdim=True)
        var = xf.var(-1, keepdim=True, unbiased=False)
        return ((xf - mu) / (var + eps).sqrt() * weight + bias).to(x.dtype)

    check_layer_norm(my_ln)   # ✔ layer_norm: all 7 cases match torch. / ...
"""

from .engine import Case, CheckResult, Mistake, run_cases
from .backprop_drills import (check_bn_backward, check_bn_running_stats, check_fold_bn,
                              check_ln_backward, check_sync_bn_merge)
from .bn_practice import check_batch_renorm, check_frozen_batch_norm, check_weight_decay_groups
from .eval_bn import check_batch_norm_eval
from .norms import check_batch_norm, check_group_norm, check_layer_norm, check_rms_norm
from .sync_bn import check_merge
from .transformer import check_block_forward
from .todays_transformers import check_dyt_module, check_qk_norm_attention
from .variance import check_variance
from .weight_norms import check_power_iteration, check_weight_norm, check_weight_norm_grad
from .kernels import check_layer_norm_backward_kernel, check_rms_norm_kernel

__all__ = ["CheckResult", "Case", "Mistake", "run_cases", "check_layer_norm", "check_batch_norm",
           "check_rms_norm", "check_group_norm", "check_batch_norm_eval", "check_block_forward",
           "check_variance", "check_merge", "check_qk_norm_attention", "check_dyt_module",
           "check_weight_decay_groups", "check_frozen_batch_norm", "check_batch_renorm",
           "check_weight_norm", "check_weight_norm_grad", "check_power_iteration",
           "check_bn_backward", "check_ln_backward", "check_bn_running_stats", "check_fold_bn",
           "check_sync_bn_merge", "check_rms_norm_kernel", "check_layer_norm_backward_kernel"]

from .atlas import check_frn, check_switchable_norm  # noqa: E402  (lesson 14)

__all__ += ["check_switchable_norm", "check_frn"]

from .spot_the_bug import (check_bf16_row_mean, check_checkpoint_norm,  # noqa: E402  (lesson 12, section 8)
                           check_deepnorm_residual, check_makemore_batch_norm, check_module_buffers,
                           check_residual_branches, check_rms_norm_rsqrt, check_running_var_update)

__all__ += ["check_deepnorm_residual", "check_makemore_batch_norm", "check_running_var_update",
            "check_residual_branches", "check_checkpoint_norm", "check_module_buffers",
            "check_bf16_row_mean", "check_rms_norm_rsqrt"]
