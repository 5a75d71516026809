//! The kernels of the nn and indexing ops (issue 12) as one [`NnKernel`]
//! value handed to [`Backend::nn`](super::Backend::nn): index gathers and
//! scatters, the fused layer-norm forward and backward, and the fused
//! log-softmax + NLL of cross-entropy.
//!
//! The tensor layer (`ops/index.rs`, `ops/nn.rs`) has checked every shape,
//! dtype and index value before a kernel runs (from a cached value range
//! where one is known, `value_range.rs`). The index kernels still bound
//! every index they read, so that a wrong cached range could never make
//! them touch memory outside their operands.
//! "Acc" below is the statistics type: f64 for f64 data, f32 otherwise.

use super::Arg;
use crate::ops::{AvgMode, Windows};

/// Mask positions per chunk of [`NnKernel::MaskCount`] and
/// [`NnKernel::MaskCompact`] (a CUDA block, or a CPU task, per chunk).
pub(crate) const MASK_CHUNK: usize = 4096;

/// One nn or index kernel; operands carry their layouts.
pub(crate) enum NnKernel<'a> {
    /// `out[p] = src[q]`, bits copied, with `q[d] = maps[d].source(p[d],
    /// src.shape[d])` ([`crate::ops::DimMap`]) on every dim, or the element
    /// whose little-endian bits are `fill` where any map names nothing
    /// (flip, roll, repeat, pad; `ops/shape_ops.rs`). `out` (fresh, of
    /// src's rank and dtype) has its own shape and strides; `src` is read
    /// only inside its shape.
    MapCopy {
        out: &'a Arg<'a>,
        src: &'a Arg<'a>,
        maps: &'a [crate::ops::DimMap],
        fill: u64,
    },
    /// `out[p] = src[p with coordinate dim replaced by index[p]]` for every
    /// position `p` of `out`. `index` (i64 or i32) has strides broadcast to
    /// out's shape; `src` has out's rank and dtype and its own sizes (only its
    /// strides are read, plus `dim`'s stride for the looked-up coordinate).
    /// `bound` is src's size along `dim`: an index outside `[0, bound)`
    /// (which the tensor layer's check excludes) reads zero instead of
    /// memory, as defence in depth.
    Gather {
        out: &'a Arg<'a>,
        src: &'a Arg<'a>,
        index: &'a Arg<'a>,
        dim: usize,
        bound: usize,
    },
    /// `out[p with dim replaced by index[p]] += src[p]` for every position
    /// `p` of `index`'s shape (index i64 or i32; `src` of out's dtype, laid
    /// out with index's shape). `out` has no internal overlap. On the CPU
    /// the additions happen in row-major order of `p`, in the dtype (bool
    /// ors, integers wrap); GPUs receive only f32, f64, i32 or i64 `out`.
    /// `bound` is out's size along `dim`: an index outside `[0, bound)` adds
    /// nothing (defence in depth, as for [`NnKernel::Gather`]).
    ScatterAdd {
        out: &'a Arg<'a>,
        index: &'a Arg<'a>,
        src: &'a Arg<'a>,
        dim: usize,
        bound: usize,
    },
    /// Layer norm over the rows of the contiguous `[rows, cols]` `x`
    /// (float): `out` (x's dtype, contiguous), `mean` and `rstd` (Acc,
    /// contiguous `[rows]`); `weight`/`bias` contiguous `[cols]` of x's dtype
    /// or f32. `out = (x - mean) * rstd * weight + bias`, the product and the
    /// sum in the computation type (f64 for f64, else f32) and the bias 0
    /// where absent, as PyTorch's `* gamma + beta` (a zero product is then
    /// +0.0); `rstd = 1 / sqrt(var + eps)` with eps in the computation type
    /// (beyond f32's range, inf). The CPU backend computes all of it as
    /// PyTorch's CPU kernel does, fused multiply-adds included, and matches
    /// its output, mean and rstd bit for bit.
    LayerNorm {
        out: &'a Arg<'a>,
        mean: &'a Arg<'a>,
        rstd: &'a Arg<'a>,
        x: &'a Arg<'a>,
        weight: Option<&'a Arg<'a>>,
        bias: Option<&'a Arg<'a>>,
        rows: usize,
        cols: usize,
        eps: f64,
    },
    /// The input gradient of layer norm, per row: with `g = dy * weight` and
    /// `xhat = (x - mean) * rstd`, `dx = rstd * (g - mean(g) - xhat *
    /// mean(g * xhat))`. Each backend computes it as PyTorch's kernel on the
    /// same device does, so that its zeros have PyTorch's signs: the CPU as
    /// `rstd g + b x + c` (`b = (Σg mean - Σg x) rstd³ / N`,
    /// `c = -b mean - Σg rstd / N`), CUDA as written first (PyTorch's CUDA
    /// kernel: `rstd / N (N g - xhat Σ g xhat - Σg)`; where rstd is 0 the
    /// two devices' zeros can differ in sign, in PyTorch as here). `dx`,
    /// `dy`, `x` contiguous `[rows, cols]` of x's dtype;
    /// `mean`, `rstd` as saved by [`NnKernel::LayerNorm`].
    LayerNormBackward {
        dx: &'a Arg<'a>,
        dy: &'a Arg<'a>,
        x: &'a Arg<'a>,
        mean: &'a Arg<'a>,
        rstd: &'a Arg<'a>,
        weight: Option<&'a Arg<'a>>,
        rows: usize,
        cols: usize,
    },
    /// First pass of the weight and bias gradients of layer norm: the rows
    /// are cut into `parts` contiguous groups, and part `p` writes
    /// `dw[p, j] = Σ dy[r, j] * xhat[r, j]` and `db[p, j] = Σ dy[r, j]` over
    /// its rows (Acc, contiguous `[parts, cols]`; f64 on the CPU). The
    /// caller sums over `p`. The CPU backend writes the whole sums, as
    /// PyTorch's CPU kernel forms them on one thread, to part 0 and leaves
    /// the other parts 0.
    LayerNormParamsBackward {
        dw: Option<&'a Arg<'a>>,
        db: Option<&'a Arg<'a>>,
        dy: &'a Arg<'a>,
        x: &'a Arg<'a>,
        mean: &'a Arg<'a>,
        rstd: &'a Arg<'a>,
        rows: usize,
        cols: usize,
        parts: usize,
    },
    /// The fused log-softmax + NLL forward over the rows of the contiguous
    /// `[rows, classes]` `logits` (float). Writes the row's logsumexp in two
    /// parts (Acc, contiguous `[rows, 2]`): `lse[2r] = m`, the row's
    /// maximum, and `lse[2r + 1] = s = log Σ_c exp(x[r, c] - m)` (both NaN
    /// for a row holding NaN or +inf; m = -inf and s = 0 for an all -inf
    /// row). With `target` (i64, `[rows]`) it also writes, for rows whose
    /// target is not `ignore_index`: `nll[r] = -((x[r, t] - m) - s) * w[t]`,
    /// `smooth[r] = -Σ_c ((x[r, c] - m) - s) * w[c]` (the sum from +0.0)
    /// and `wt[r] = w[t]` (w = 1 without `weight`, a contiguous `[classes]`
    /// of logits' dtype), and 0 in all three for ignored rows: `log p` is
    /// formed from `x - m`, never from `x - (m + s)`, which cancels when |m|
    /// is huge, and negated as PyTorch negates it (a log-probability of +0.0
    /// gives -0.0). No probability is written anywhere. On the CPU, f32
    /// logits take PyTorch's f32 arithmetic instead (its log_softmax
    /// kernels, the products and the sum's order), so that the losses are
    /// PyTorch's bit for bit.
    CrossEntropy {
        lse: &'a Arg<'a>,
        nll: Option<&'a Arg<'a>>,
        smooth: Option<&'a Arg<'a>>,
        wt: Option<&'a Arg<'a>>,
        logits: &'a Arg<'a>,
        target: Option<&'a Arg<'a>>,
        weight: Option<&'a Arg<'a>>,
        ignore_index: i64,
        rows: usize,
        classes: usize,
        /// Whether the class dim is the input's last ((C) and (N, C)
        /// inputs), and otherwise `inner`, the product of the input's dims
        /// after it (row `r` of an (N, C, d1, ...) input is position
        /// `r % inner` of those dims). On the CPU an f32 row's
        /// log-probabilities are PyTorch's log_softmax along that dim, bit
        /// for bit (its kernels for the last dim and for other dims round
        /// differently), and the smoothing sum adds in the order of
        /// PyTorch's sum along it.
        class_last: bool,
        inner: usize,
    },
    /// The fused backward, PyTorch's chain step by step: the gradient of
    /// the log-probabilities is `gl[c] = [c == t] w[t] * -((1 - eps)
    /// coef[r])`, plus `-(coef[r] eps / C) * w[c]` with smoothing (0 in an
    /// ignored row), then log_softmax's `dx[r, c] = gl[c] - p[c] * Σ_c
    /// gl[c]` with `p = exp((x[r, c] - m) - s)` recomputed from the
    /// forward's `lse` (`[rows, 2]`: m and s); `W = Σ_c w[c]` (C without a
    /// weight). `coef` is Acc `[rows]` (the upstream gradient with the
    /// reduction's scale). The sum starts from +0.0, except for one class
    /// along the input's last dim (`class_last`), where PyTorch's sum is
    /// that class's value itself.
    CrossEntropyBackward {
        dx: &'a Arg<'a>,
        logits: &'a Arg<'a>,
        lse: &'a Arg<'a>,
        target: &'a Arg<'a>,
        weight: Option<&'a Arg<'a>>,
        coef: &'a Arg<'a>,
        ignore_index: i64,
        smoothing: f64,
        // Read by the CUDA kernel only.
        #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
        weight_sum: f64,
        rows: usize,
        classes: usize,
        class_last: bool,
    },
    /// The count pass of a stream compaction (`masked_select`,
    /// `masked_scatter`): `counts[b]` (i64, contiguous `[blocks]`) = the
    /// number of set elements of the contiguous bool `mask` (`n` elements)
    /// in chunk `b` (positions `[b * MASK_CHUNK, (b + 1) * MASK_CHUNK)`).
    MaskCount {
        counts: &'a Arg<'a>,
        mask: &'a Arg<'a>,
        n: usize,
    },
    /// The scatter pass of a stream compaction. `offsets` is the inclusive
    /// cumulative sum of [`NnKernel::MaskCount`]'s counts; the k-th set
    /// position of `mask` (row-major) is `i`. Without `expand`: `out[k] =
    /// src[i]` (`src` contiguous with `n` elements, `out` contiguous with the
    /// count); with `expand`: `out[i] = src[k]` (`out` contiguous with `n`
    /// elements, unset positions untouched; `src` contiguous with at least
    /// the count). `out` and `src` have one dtype (the elements are copied
    /// as bits).
    MaskCompact {
        out: &'a Arg<'a>,
        src: &'a Arg<'a>,
        mask: &'a Arg<'a>,
        offsets: &'a Arg<'a>,
        n: usize,
        expand: bool,
    },
    /// A sliding-window kernel over `windows` (convolution's columns,
    /// pooling): each operand `[N, C, ...]` with the windows' spatial sizes.
    Window {
        windows: &'a Windows,
        op: WindowKernel<'a>,
    },
}

/// The sliding-window kernels of [`NnKernel::Window`] (session 76).
pub(crate) enum WindowKernel<'a> {
    /// im2col: `cols` (contiguous `[N, C * K, O]`, `K` and `O` the
    /// products of the kernel and of the windows) holds, at row `c * K + k`
    /// and column `o`, the element of `x` (`[N, C, L...]`, any strides, any
    /// dtype; bits copied) at kernel offset `k` of window `o`, or zero where
    /// that position lies in the padding or past the input.
    Im2col { cols: &'a Arg<'a>, x: &'a Arg<'a> },
    /// col2im, the adjoint of [`WindowKernel::Im2col`]: each element of `x`
    /// (contiguous `[N, C, L...]`, float or bool) is the sum (bool: or), in
    /// the computation type and by kernel offset, of the entries of `cols`
    /// (contiguous `[N, C * K, O]`, x's dtype) that read it (zero where
    /// none does).
    Col2im { x: &'a Arg<'a>, cols: &'a Arg<'a> },
    /// Max pooling of `x` (`[N, C, L...]`, any strides; float or integer)
    /// into the contiguous `values` (x's dtype) and `indices` (i64, the
    /// position in the flattened spatial dims), `[N, C, O...]`: PyTorch's
    /// scan (the first maximum, the last NaN); a window without an input
    /// element gives the dtype's lowest value (-inf for floats) and the
    /// index of its first position past the left padding.
    MaxPool {
        values: &'a Arg<'a>,
        indices: &'a Arg<'a>,
        x: &'a Arg<'a>,
    },
    /// Average pooling of `x` (`[N, C, L...]`, any strides; float or i64)
    /// into the contiguous `out` (`[N, C, O...]`): the window's input
    /// elements summed in scan order (computation type; i64 wraps) over
    /// its divisor ([`AvgMode`]; i64 truncates).
    AvgPool {
        out: &'a Arg<'a>,
        x: &'a Arg<'a>,
        mode: AvgMode,
    },
    /// The input gradient of [`WindowKernel::AvgPool`] (float): `dx`
    /// (contiguous `[N, C, L...]`) sums, in the computation type and by
    /// window, `dy[o] / divisor(o)` (`dy` contiguous `[N, C, O...]`) over
    /// the windows holding each element.
    AvgPoolBackward {
        dx: &'a Arg<'a>,
        dy: &'a Arg<'a>,
        mode: AvgMode,
    },
    /// The input gradient of [`WindowKernel::MaxPool`] (float): each element
    /// of `dx` (contiguous `[N, C, L...]`) sums, in the computation type
    /// and in window order, `dy[o]` over the windows `o` that hold it and
    /// whose index (`indices`) names it (`dy`, `indices` contiguous
    /// `[N, C, O...]`); zero elsewhere.
    MaxPoolBackward {
        dx: &'a Arg<'a>,
        dy: &'a Arg<'a>,
        indices: &'a Arg<'a>,
    },
}
