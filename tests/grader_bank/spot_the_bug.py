"""Lesson 12, section 8 ("spot the bug in famous code"): for each drill, the original bug
(adapted as the notebook shows it), other wrong fixes, and right fixes in several styles.
The Triton kernels are in the bank where Triton is installed (Linux)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from helpers import spot_the_bug as spot
from helpers.kernels import AVAILABLE, tl, triton

from . import PASS, Sol, collector

SOLUTIONS: list[Sol] = []
add = collector(SOLUTIONS)

# ------------------------------------------------------------------ DeepNorm, LN(alpha x + gx)
T = "check_deepnorm_residual"
add(T, "labml.ai's line: LN(x + alpha * gx)", "alpha_on_sublayer")(spot.labml_deep_norm)


@add(T, "x divided by alpha: LN(x / alpha + gx)", "alpha_on_sublayer")
def _(x, gx, alpha, w, b, eps):
    return F.layer_norm(x / alpha + gx, x.shape[-1:], w, b, eps)


@add(T, "labml.ai before commit 0eb74d7: x + alpha * gx", "no_layer_norm")
def _(x, gx, alpha, w, b, eps):
    return x + alpha * gx


@add(T, "alpha * x + gx without the norm", "no_layer_norm")
def _(x, gx, alpha, w, b, eps):
    return alpha * x + gx


@add(T, "plain Post-LN: LN(x + gx)", "alpha_missing")
def _(x, gx, alpha, w, b, eps):
    return F.layer_norm(x + gx, x.shape[-1:], w, b, eps)


@add(T, "the norm on the branch: alpha * x + LN(gx)", "norm_on_branch_only")
def _(x, gx, alpha, w, b, eps):
    return alpha * x + F.layer_norm(gx, x.shape[-1:], w, b, eps)


@add(T, "by hand, unbiased variance", "unbiased_variance")
def _(x, gx, alpha, w, b, eps):
    h = alpha * x + gx
    return (h - h.mean(-1, keepdim=True)) / torch.sqrt(h.var(-1, keepdim=True) + eps) * w + b


@add(T, "by hand, eps outside the root", "eps_outside_sqrt")
def _(x, gx, alpha, w, b, eps):
    h = alpha * x + gx
    return (h - h.mean(-1, keepdim=True)) / (h.std(-1, keepdim=True, unbiased=False) + eps) * w + b


@add(T, "weight and bias left out", "affine_missing")
def _(x, gx, alpha, w, b, eps):
    return F.layer_norm(alpha * x + gx, x.shape[-1:], eps=eps)


@add(T, "normalised over the first dim", None)
def _(x, gx, alpha, w, b, eps):
    h = alpha * x + gx
    return (h - h.mean(0, keepdim=True)) / torch.sqrt(h.var(0, keepdim=True, unbiased=False) + eps) * w + b


add(T, "the model solution")(spot.deep_norm)


@add(T, "by hand, var_mean")
def _(x, gx, alpha, w, b, eps):
    h = torch.add(gx, x, alpha=alpha)
    var, mean = torch.var_mean(h, -1, keepdim=True, correction=0)
    return (h - mean) * torch.rsqrt(var + eps) * w + b


@add(T, "an nn.LayerNorm given the weights")
def _(x, gx, alpha, w, b, eps):
    ln = nn.LayerNorm(x.shape[-1], eps=eps)
    with torch.no_grad():
        ln.weight.copy_(w)
        ln.bias.copy_(b)
        return ln(x.mul(alpha).add(gx))


# ------------------------------------------------------------------ makemore's BatchNorm1d
T = "check_makemore_batch_norm"
add(T, "makemore part 3: x.var(0, keepdim=True)", "unbiased_variance")(spot.makemore_batch_norm)


@add(T, "the unbiased std squared", "unbiased_variance")
def _(x, gamma, beta, eps):
    return gamma * (x - x.mean(0)) / torch.sqrt(x.std(0) ** 2 + eps) + beta


@add(T, "eps outside the root", "eps_outside_sqrt")
def _(x, gamma, beta, eps):
    return gamma * (x - x.mean(0)) / (x.std(0, unbiased=False) + eps) + beta


@add(T, "eps left out", "eps_missing")
def _(x, gamma, beta, eps):
    return gamma * (x - x.mean(0)) / x.std(0, unbiased=False) + beta


@add(T, "statistics per sample (dim 1)", "statistics_per_row")
def _(x, gamma, beta, eps):
    m, v = x.mean(1, keepdim=True), x.var(1, keepdim=True, unbiased=False)
    return gamma * (x - m) / torch.sqrt(v + eps) + beta


@add(T, "gamma and beta swapped", "gamma_beta_swapped")
def _(x, gamma, beta, eps):
    return beta * (x - x.mean(0)) / torch.sqrt(x.var(0, unbiased=False) + eps) + gamma


@add(T, "one pass: E[x^2] - E[x]^2", "one_pass_variance")
def _(x, gamma, beta, eps):
    var = (x * x).mean(0) - x.mean(0) ** 2
    return gamma * (x - x.mean(0)) / torch.sqrt(var + eps) + beta


@add(T, "no gamma, no beta", "affine_missing")
def _(x, gamma, beta, eps):
    return (x - x.mean(0)) / torch.sqrt(x.var(0, unbiased=False) + eps)


@add(T, "one variance for the whole batch", None)
def _(x, gamma, beta, eps):
    return gamma * (x - x.mean(0)) / torch.sqrt(x.var(unbiased=False) + eps) + beta


add(T, "the model solution")(spot.batch_norm_1d_train)


@add(T, "F.batch_norm in training mode")
def _(x, gamma, beta, eps):
    return F.batch_norm(x, None, None, gamma, beta, training=True, eps=eps)


@add(T, "var_mean with correction=0")
def _(x, gamma, beta, eps):
    var, mean = torch.var_mean(x, 0, correction=0)
    return torch.addcmul(beta, (x - mean) * torch.rsqrt(var + eps), gamma)


@add(T, "the mean of the squared deviations")
def _(x, gamma, beta, eps):
    d = x - x.mean(0, keepdim=True)
    return gamma * d / (d.pow(2).mean(0, keepdim=True) + eps).sqrt() + beta


# ------------------------------------------------------------------ the running variance
T = "check_running_var_update"
add(T, "tinygrad before PR 807: the biased batch variance", "biased_running_var")(
    spot.tinygrad_running_stats)


def _dims(x):
    return [0] + list(range(2, x.dim()))


@add(T, "ttnn before PR 55440: mean of the squared deviations", "biased_running_var")
def _(x, rm, rv, momentum):
    mean = x.mean(_dims(x), keepdim=True)
    var = ((x - mean) ** 2).mean(_dims(x))
    return (1 - momentum) * rm + momentum * mean.reshape(-1), (1 - momentum) * rv + momentum * var


@add(T, "Bessel's correction with the batch size N", "bessel_over_batch_only")
def _(x, rm, rv, momentum):
    n = x.shape[0]
    var = x.var(_dims(x), unbiased=False) * n / (n - 1)
    return (1 - momentum) * rm + momentum * x.mean(_dims(x)), (1 - momentum) * rv + momentum * var


@add(T, "momentum on the old value", "momentum_reversed")
def _(x, rm, rv, momentum):
    return momentum * rm + (1 - momentum) * x.mean(_dims(x)), momentum * rv + (1 - momentum) * x.var(_dims(x))


@add(T, "momentum on the old value, biased", "momentum_reversed")
def _(x, rm, rv, momentum):
    return (momentum * rm + (1 - momentum) * x.mean(_dims(x)),
            momentum * rv + (1 - momentum) * x.var(_dims(x), unbiased=False))


@add(T, "the standard deviation into running_var", "std_not_variance")
def _(x, rm, rv, momentum):
    return (1 - momentum) * rm + momentum * x.mean(_dims(x)), (1 - momentum) * rv + momentum * x.std(_dims(x))


@add(T, "running_mean returned unchanged", "mean_not_updated")
def _(x, rm, rv, momentum):
    return rm, (1 - momentum) * rv + momentum * x.var(_dims(x))


@add(T, "the variance over the batch dim only", "only_2d")
def _(x, rm, rv, momentum):
    v = x.var(0)
    v = v.reshape(v.shape[0], -1).mean(-1)
    return (1 - momentum) * rm + momentum * x.mean(_dims(x)), (1 - momentum) * rv + momentum * v


add(T, "the model solution")(spot.running_stats)


@add(T, "x.var over several dims (unbiased by default)")
def _(x, rm, rv, momentum):
    return (rm.lerp(x.mean(_dims(x)), momentum), rv.lerp(x.var(_dims(x)), momentum))


@add(T, "F.batch_norm on copies of the buffers")
def _(x, rm, rv, momentum):
    rm, rv = rm.clone(), rv.clone()
    F.batch_norm(x, rm, rv, training=True, momentum=momentum)
    return rm, rv


@add(T, "channels first, then one flat row per channel")
def _(x, rm, rv, momentum):
    rows = x.transpose(0, 1).reshape(x.shape[1], -1)
    return ((1 - momentum) * rm + momentum * rows.mean(1), (1 - momentum) * rv + momentum * rows.var(1))


# ------------------------------------------------------------------ five residual branches
T = "check_residual_branches"
add(T, "UDL notebook 11.3 at 19ee3af: linear4 three times", "reused_linear")(spot.udl_residual_net)


@add(T, "a loop that stops at layer 3", "reused_linear")
def _(x, W, b):
    h = F.linear(x, W[0], b[0])
    for k in range(1, 6):
        h = h + F.linear(h.relu(), W[min(k, 3)], b[min(k, 3)])
    return F.linear(h, W[6], b[6])


@add(T, "ReLU after the sum", "relu_after_add")
def _(x, W, b):
    h = F.linear(x, W[0], b[0])
    for k in range(1, 6):
        h = (h + F.linear(h.relu(), W[k], b[k])).relu()
    return F.linear(h, W[6], b[6])


@add(T, "no residual connection", "no_residual")
def _(x, W, b):
    h = F.linear(x, W[0], b[0])
    for k in range(1, 6):
        h = F.linear(h.relu(), W[k], b[k])
    return F.linear(h, W[6], b[6])


@add(T, "no ReLU in the branches", "relu_missing")
def _(x, W, b):
    h = F.linear(x, W[0], b[0])
    for k in range(1, 6):
        h = h + F.linear(h, W[k], b[k])
    return F.linear(h, W[6], b[6])


@add(T, "branch k uses layer k - 1", None)
def _(x, W, b):
    h = F.linear(x, W[0], b[0])
    for k in range(1, 6):
        h = h + F.linear(h.relu(), W[k - 1], b[k - 1])
    return F.linear(h, W[6], b[6])


@add(T, "the output layer left out", None)
def _(x, W, b):
    h = F.linear(x, W[0], b[0])
    for k in range(1, 6):
        h = h + F.linear(h.relu(), W[k], b[k])
    return h


@add(T, "a ReLU after the first layer", None)
def _(x, W, b):
    h = F.linear(x, W[0], b[0]).relu()
    for k in range(1, 6):
        h = h + F.linear(h.relu(), W[k], b[k])
    return F.linear(h, W[6], b[6])


add(T, "the model solution")(spot.residual_net)


@add(T, "unrolled, as the fixed notebook writes it")
def _(x, W, b):
    f = x @ W[0].T + b[0]
    res1 = f + f.relu() @ W[1].T + b[1]
    res2 = res1 + res1.relu() @ W[2].T + b[2]
    res3 = res2 + res2.relu() @ W[3].T + b[3]
    res4 = res3 + res3.relu() @ W[4].T + b[4]
    res5 = res4 + res4.relu() @ W[5].T + b[5]
    return res5 @ W[6].T + b[6]


@add(T, "nn.Linear modules built from the weights")
def _(x, W, b):
    layers = []
    for w, v in zip(W, b):
        lin = nn.Linear(w.shape[1], w.shape[0])
        with torch.no_grad():
            lin.weight.copy_(w)
            lin.bias.copy_(v)
        layers.append(lin)
    with torch.no_grad():
        h = layers[0](x)
        for lin in layers[1:6]:
            h = h + lin(torch.relu(h))
        return layers[6](h)


# ------------------------------------------------------------------ the checkpoint's norm
T = "check_checkpoint_norm"
add(T, "SGLang before PR 11791: RMSNorm", "rmsnorm_for_layernorm")(spot.sglang_merger_norm)


@add(T, "RMSNorm by hand, the bias dropped", "rmsnorm_for_layernorm")
def _(x, w, b, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


@add(T, "RMSNorm plus the bias", "rmsnorm_with_bias")
def _(x, w, b, eps):
    return F.rms_norm(x, x.shape[-1:], w, eps) + b


@add(T, "LayerNorm without the bias", "bias_missing")
def _(x, w, b, eps):
    return F.layer_norm(x, x.shape[-1:], w, None, eps)


@add(T, "LayerNorm by hand, unbiased variance", "unbiased_variance")
def _(x, w, b, eps):
    return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + eps) * w + b


@add(T, "LayerNorm by hand, eps outside the root", "eps_outside_sqrt")
def _(x, w, b, eps):
    return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True, unbiased=False) + eps) * w + b


@add(T, "LayerNorm without weight and bias", "affine_missing")
def _(x, w, b, eps):
    return F.layer_norm(x, x.shape[-1:], eps=eps)


@add(T, "nn.LayerNorm's default eps 1e-5 instead of the checkpoint's", None)
def _(x, w, b, eps):
    return F.layer_norm(x, x.shape[-1:], w, b, 1e-5)


@add(T, "normalised over every dim but the first", "only_2d")
def _(x, w, b, eps):
    dims = list(range(1, x.dim()))
    m, v = x.mean(dims, keepdim=True), x.var(dims, keepdim=True, unbiased=False)
    return (x - m) / torch.sqrt(v + eps) * w + b


add(T, "the model solution")(spot.checkpoint_norm)


@add(T, "LayerNorm by hand, var_mean")
def _(x, w, b, eps):
    var, mean = torch.var_mean(x, -1, keepdim=True, correction=0)
    return torch.addcmul(b, (x - mean) * torch.rsqrt(var + eps), w)


@add(T, "an nn.LayerNorm loaded with the checkpoint's tensors")
def _(x, w, b, eps):
    ln = nn.LayerNorm(x.shape[-1], eps=eps)
    ln.load_state_dict({"weight": w, "bias": b})
    with torch.no_grad():
        return ln(x)


# ------------------------------------------------------------------ d2l's module and its buffers
T = "check_module_buffers"
add(T, "d2l-zh's BatchNorm: plain tensor attributes", "plain_attributes")(spot.D2LBatchNorm)


class _D2LWithDevice(nn.Module):  # d2l's class as published, the device copy included
    def __init__(self, num_features, num_dims):
        super().__init__()
        shape = (1, num_features) if num_dims == 2 else (1, num_features, 1, 1)
        self.gamma = nn.Parameter(torch.ones(shape))
        self.beta = nn.Parameter(torch.zeros(shape))
        self.moving_mean = torch.zeros(shape)
        self.moving_var = torch.ones(shape)

    def forward(self, X):
        if self.moving_mean.device != X.device:
            self.moving_mean = self.moving_mean.to(X.device)
            self.moving_var = self.moving_var.to(X.device)
        Y, self.moving_mean, self.moving_var = spot.d2l_batch_norm(
            X, self.gamma, self.beta, self.moving_mean, self.moving_var, eps=1e-5, momentum=0.9)
        return Y


add(T, "d2l-zh's class with its device copy", "plain_attributes")(_D2LWithDevice)


def _variant(init="buffer", names=("moving_mean", "moving_var"), zero_var=False, store=True,
             momentum=0.9, use_moving_in_training=False):
    class Variant(nn.Module):
        def __init__(self, num_features, num_dims):
            super().__init__()
            shape = (1, num_features) if num_dims == 2 else (1, num_features, 1, 1)
            self.gamma = nn.Parameter(torch.ones(shape))
            self.beta = nn.Parameter(torch.zeros(shape))
            mm, mv = torch.zeros(shape), (torch.zeros if zero_var else torch.ones)(shape)
            if init == "buffer":
                self.register_buffer(names[0], mm)
                self.register_buffer(names[1], mv)
            elif init == "non_persistent":
                self.register_buffer(names[0], mm, persistent=False)
                self.register_buffer(names[1], mv, persistent=False)
            elif init == "frozen_parameter":
                setattr(self, names[0], nn.Parameter(mm, requires_grad=False))
                setattr(self, names[1], nn.Parameter(mv, requires_grad=False))
            elif init == "parameter":
                setattr(self, names[0], nn.Parameter(mm))
                setattr(self, names[1], nn.Parameter(mv))

        def forward(self, X):
            mm, mv = getattr(self, names[0]), getattr(self, names[1])
            if use_moving_in_training and self.training:
                return self.gamma * (X - mm) / torch.sqrt(mv + 1e-5) + self.beta
            Y, mm_new, mv_new = spot.d2l_batch_norm(X, self.gamma, self.beta, mm, mv, eps=1e-5,
                                                    momentum=momentum)
            if store:
                setattr(self, names[0], mm_new)
                setattr(self, names[1], mv_new)
            return Y
    return Variant


add(T, "nn.Parameter(requires_grad=False)", "stats_as_parameters")(_variant("frozen_parameter"))
add(T, "trainable nn.Parameter", "stats_as_parameters")(_variant("parameter"))
add(T, "register_buffer(..., persistent=False)", "non_persistent_buffers")(_variant("non_persistent"))
add(T, "buffers named running_mean and running_var", "buffer_names")(
    _variant(names=("running_mean", "running_var")))
add(T, "the updated statistics are not stored", "stats_not_updated")(_variant(store=False))
add(T, "moving_var initialised to zeros", "wrong_initial_values")(_variant(zero_var=True))
add(T, "momentum 0.1 in d2l's convention", "momentum_reversed")(_variant(momentum=0.1))
add(T, "the moving statistics used in training", "wrong_output")(
    _variant(use_moving_in_training=True))

add(T, "the model solution: register_buffer")(spot.BatchNormWithBuffers)


class _InPlace(nn.Module):  # its own batch_norm, self.training, buffers updated in place
    def __init__(self, num_features, num_dims):
        super().__init__()
        shape = (1, num_features) if num_dims == 2 else (1, num_features, 1, 1)
        self.gamma = nn.Parameter(torch.ones(shape))
        self.beta = nn.Parameter(torch.zeros(shape))
        self.register_buffer("moving_mean", torch.zeros(shape))
        self.register_buffer("moving_var", torch.ones(shape))

    def forward(self, X):
        dims = [0] if X.dim() == 2 else [0, 2, 3]
        if self.training:
            mean = X.mean(dims, keepdim=True)
            var = X.var(dims, keepdim=True, unbiased=False)
            with torch.no_grad():
                self.moving_mean.mul_(0.9).add_(0.1 * mean)
                self.moving_var.mul_(0.9).add_(0.1 * var)
        else:
            mean, var = self.moving_mean, self.moving_var
        return self.gamma * (X - mean) / torch.sqrt(var + 1e-5) + self.beta


add(T, "its own forward, buffers updated in place")(_InPlace)


class _TorchConvention(nn.Module):  # PyTorch's rule: F.batch_norm, (C,) buffers, momentum 0.1
    def __init__(self, num_features, num_dims):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(num_features))
        self.beta = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("moving_mean", torch.zeros(num_features))
        self.register_buffer("moving_var", torch.ones(num_features))

    def forward(self, X):
        return F.batch_norm(X, self.moving_mean, self.moving_var, self.gamma, self.beta,
                            training=self.training, momentum=0.1, eps=1e-5)


add(T, "PyTorch's convention with F.batch_norm")(_TorchConvention)

# ------------------------------------------------------------------ RMSNorm with rsqrt
T = "check_rms_norm_rsqrt"
add(T, "LLM Foundry before PR 372: x / rsqrt(...)", "divides_by_rsqrt")(spot.llmfoundry_rms_norm)


@add(T, "multiplied by sqrt(mean(x**2) + eps)", "divides_by_rsqrt")
def _(x, w, eps):
    return x * torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


@add(T, "eps outside the root", "eps_outside_sqrt")
def _(x, w, eps):
    return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * w


@add(T, "eps left out", "eps_missing")
def _(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True)) * w


@add(T, "the mean subtracted first", "mean_subtracted")
def _(x, w, eps):
    x = x - x.mean(-1, keepdim=True)
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


@add(T, "the sum of squares", "sum_not_mean")
def _(x, w, eps):
    return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps) * w


@add(T, "no keepdim", "missing_keepdim")
def _(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1) + eps) * w


@add(T, "the weight left out", "affine_missing")
def _(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


@add(T, "over the first dim", None)
def _(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(0, keepdim=True) + eps) * w


add(T, "the model solution")(spot.rms_norm)


@add(T, "F.rms_norm")
def _(x, w, eps):
    return F.rms_norm(x, x.shape[-1:], w, eps)


@add(T, "divided by the root")
def _(x, w, eps):
    return w * (x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + eps))


@add(T, "an nn.RMSNorm given the weight")
def _(x, w, eps):
    layer = nn.RMSNorm(x.shape[-1], eps=eps)
    with torch.no_grad():
        layer.weight.copy_(w)
        return layer(x)


# ------------------------------------------------------------------ Triton: bfloat16 row means
if AVAILABLE:
    T = "check_bf16_row_mean"
    add(T, "the issue's pattern: tl.sum of the bfloat16 row", "bf16_bit_patterns")(
        spot.bf16_row_mean_kernel)

    @add(T, "cast to float32 after the sum", "bf16_bit_patterns")
    @triton.jit
    def _k1(X, Out, N, BLOCK_N: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK_N)
        x = tl.load(X + row * N + cols, mask=cols < N, other=0.0)
        tl.store(Out + row, tl.sum(x, axis=0).to(tl.float32) / N)

    @add(T, "divided by BLOCK_N", "divided_by_block")
    @triton.jit
    def _k2(X, Out, N, BLOCK_N: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK_N)
        x = tl.load(X + row * N + cols, mask=cols < N, other=0.0).to(tl.float32)
        tl.store(Out + row, tl.sum(x, axis=0) / BLOCK_N)

    @add(T, "no mask on the load", "unmasked_load")
    @triton.jit
    def _k3(X, Out, N, BLOCK_N: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK_N)
        x = tl.load(X + row * N + cols).to(tl.float32)
        tl.store(Out + row, tl.sum(x, axis=0) / N)

    @add(T, "a mask that is always true", "unmasked_load")
    @triton.jit
    def _k4(X, Out, N, BLOCK_N: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK_N)
        x = tl.load(X + row * N + cols, mask=cols < BLOCK_N, other=0.0).to(tl.float32)
        tl.store(Out + row, tl.sum(x, axis=0) / N)

    @add(T, "rows BLOCK_N apart", "row_stride")
    @triton.jit
    def _k5(X, Out, N, BLOCK_N: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK_N)
        x = tl.load(X + row * BLOCK_N + cols, mask=cols < N, other=0.0).to(tl.float32)
        tl.store(Out + row, tl.sum(x, axis=0) / N)

    @add(T, "the sum stored", "sum_not_mean")
    @triton.jit
    def _k6(X, Out, N, BLOCK_N: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK_N)
        x = tl.load(X + row * N + cols, mask=cols < N, other=0.0).to(tl.float32)
        tl.store(Out + row, tl.sum(x, axis=0))

    @add(T, "every program stores to Out[0]", "program_id_ignored")
    @triton.jit
    def _k7(X, Out, N, BLOCK_N: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK_N)
        x = tl.load(X + row * N + cols, mask=cols < N, other=0.0).to(tl.float32)
        tl.store(Out, tl.sum(x, axis=0) / N)

    @add(T, "the first element of each row stored", None)
    @triton.jit
    def _k8(X, Out, N, BLOCK_N: tl.constexpr):
        row = tl.program_id(0)
        x = tl.load(X + row * N).to(tl.float32)
        tl.store(Out + row, x)

    add(T, "the model solution")(spot.row_mean_kernel)

    @add(T, "cast on load, multiplied by 1 / N")
    @triton.jit
    def _r1(X, Out, N, BLOCK_N: tl.constexpr):
        pid = tl.program_id(axis=0)
        offs = tl.arange(0, BLOCK_N)
        ok = offs < N
        x = tl.load(X + pid * N + offs, mask=ok, other=0.0)
        total = tl.sum(x.to(tl.float32), axis=0)
        tl.store(Out + pid, total * (1.0 / N))

    @add(T, "tl.cast, then the mean in two steps")
    @triton.jit
    def _r2(X, Out, N, BLOCK_N: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK_N)
        x = tl.cast(tl.load(X + row * N + cols, mask=cols < N, other=0.0), tl.float32)
        s = tl.sum(x, axis=0)
        mean = s / N
        tl.store(Out + row, mean)
