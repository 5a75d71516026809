//! The core of (naive) scaled dot-product attention as one recorded op:
//! `y = softmax(mask(q kᵀ · scale), -1) v`, the math of PyTorch's eager
//! `softmax(masked_fill(q @ k.transpose(-2, -1) * scale, mask, -inf)) @ v`,
//! step by step as PyTorch's graph rounds it on the CPU: the scores scaled
//! in place (rounded to their dtype), the mask filled in, then the plain
//! softmax; on a GPU the scale and the causal mask are fused into the
//! softmax pass ([`Tensor::scaled_softmax`]).
//!
//! What it keeps for backward ([`AttentionSaving`]):
//!
//! * `Recompute` (the default): only `q`, `k` and `v`, which the caller
//!   holds anyway (views of the qkv projection's output). The probabilities
//!   `p` (`[.., L, S]`: 400 MB per GPT-2 layer at 8 × 1024 tokens in f32,
//!   half of all activations) are recomputed in backward: one more batched
//!   GEMM and one softmax pass per call, as Megatron's selective activation
//!   recomputation does.
//! * `SaveProbs`: `p` too, as PyTorch eager keeps it; no recomputation.
//!
//! With `Recompute`, a large batch (probabilities of at least 2 MiB, batch
//! dims equal in `q`, `k` and `v`) is processed in up to four pieces of its
//! first dim, in forward and in backward ([`batch_pieces`]): only one
//! piece's probabilities and score gradient are alive at once (at 8 × 1024
//! tokens, 12 heads, f32: 2 × 100 MB instead of 2 × 400 MB), for a few more,
//! smaller GEMM and softmax launches. The outputs and gradients are written
//! piece by piece into tensors of full size.
//!
//! Backward, with `p` recomputed or saved: `dv = pᵀ dy`, `dp = dy vᵀ`,
//! `ds = p (dp - sum(dp p))` (the fused softmax gradient, written over `dp`
//! by [`Tensor::softmax_backward_inplace`], so at most two score-sized
//! tensors, `p` and `dp`/`ds`, are alive at once; masked positions get
//! exactly 0 because `p` is 0 there), `dq = ds k · scale`,
//! `dk = dsᵀ q · scale`.
//!
//! Autocast: the op's policy is `LowerPrecision` (its GEMMs run in the
//! region's dtype, as `matmul`'s); its softmax computes in f32 from the
//! low-precision scores and rounds `p` once to the region's dtype, the value
//! the op-by-op graph feeds to `p @ v`. Its backward forms the softmax
//! gradient in f32 from an f32 `p` (recomputed, or kept with `SaveProbs`)
//! and an f32 copy of `dp`, as PyTorch's autocast graph does (softmax runs
//! in f32 there and keeps its f32 output): with `p` rounded to bf16 a row
//! whose largest probability is near 1 loses `1 - p` entirely, and with it
//! most of that row's score gradient. Outside autocast a half-precision `p`
//! is used as it is, as PyTorch's bf16 graph does.

use super::{formula, sum_to};
use crate::autocast::{is_autocast_enabled, DeviceType};
use crate::error::Result;
use crate::var::{record, Var};
use strata_tensor::{DType, Tensor, TensorError};

/// What [`Var::attention`] keeps for its backward.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AttentionSaving {
    /// Keep only `q`, `k`, `v`; recompute the probabilities in backward.
    #[default]
    Recompute,
    /// Keep the probabilities as well (PyTorch eager's memory, no recompute).
    SaveProbs,
}

/// The options of [`Var::attention`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AttentionArgs {
    /// The factor of `q kᵀ`; `None`: `1 / sqrt(q.shape[-1])`.
    pub scale: Option<f64>,
    /// Mask element `j` of query row `i` where `j > i` (a decoder's causal mask).
    pub causal: bool,
    /// What is kept for backward.
    pub saving: AttentionSaving,
}

/// The fewest bytes of probabilities (`[.., L, S]` scores) a piece of the
/// batch holds: smaller problems run whole.
const PIECE_BYTES: usize = 1 << 20;

/// The most pieces the batch is split into.
const MAX_PIECES: usize = 4;

/// `(start, length)` pieces of dim 0 that [`Var::attention`] with
/// [`AttentionSaving::Recompute`] runs one at a time, in forward and in
/// backward, so that only one piece's probabilities (and, in backward, the
/// gradient of its scores) are alive at once: up to [`MAX_PIECES`] equal
/// pieces, none smaller than [`PIECE_BYTES`] of probabilities. One piece (no
/// split) when the batch dims are not the same in `q`, `k` and `v` (they
/// broadcast), when there are no batch dims, or when the probabilities are
/// small.
pub(crate) fn batch_pieces(
    qs: &[usize],
    ks: &[usize],
    vs: &[usize],
    elem: usize,
) -> Vec<(usize, usize)> {
    let nd = qs.len();
    let b = qs.first().copied().unwrap_or(0);
    let same_batch = nd >= 3
        && ks.len() == nd
        && vs.len() == nd
        && qs[..nd - 2] == ks[..nd - 2]
        && qs[..nd - 2] == vs[..nd - 2];
    if !same_batch || b < 2 {
        return vec![(0, b)];
    }
    let (l, s) = (qs[nd - 2], ks[nd - 2]);
    // Saturating: an expanded batch may multiply past usize (the product
    // then fails with its own typed error).
    let bytes: usize = qs[..nd - 2]
        .iter()
        .chain([&l, &s, &elem])
        .fold(1usize, |acc, &d| acc.saturating_mul(d));
    let n = (bytes / PIECE_BYTES).clamp(1, MAX_PIECES.min(b));
    let len = b.div_ceil(n);
    (0..b)
        .step_by(len)
        .map(|at| (at, len.min(b - at)))
        .collect()
}

fn shape_err(msg: String) -> crate::AutogradError {
    TensorError::Shape {
        op: "attention",
        msg,
    }
    .into()
}

impl Var {
    /// Scaled dot-product attention without dropout, `self` the queries
    /// `[.., L, E]`, with keys `k` `[.., S, E]` and values `v` `[.., S, Ev]`
    /// (batch dims broadcast as `matmul`'s): `softmax(mask(q kᵀ · scale))
    /// v`, `[.., L, Ev]`. See the module documentation (`ops/attention.rs`) for what is
    /// saved and how the gradients are formed.
    ///
    /// Errors (typed): operands with fewer than 2 dims, mismatched inner
    /// sizes, dtypes or devices. A scale that is not finite gives NaN
    /// everywhere, output and gradients, as in PyTorch, except with an
    /// empty embedding dim (`E = 0`), where the scores are 0 whatever the
    /// scale and the output is the mean of the values, and without queries
    /// or keys, where there are no scores (zeros), as in PyTorch.
    ///
    /// ```
    /// use strata_autograd::{AttentionArgs, Var};
    /// use strata_tensor::{DType, Device, Tensor};
    /// let t = |s| Var::parameter(Tensor::randn(&[2, 4, 8], DType::F32, s, Device::Cpu).unwrap()).unwrap();
    /// let (q, k, v) = (t(1), t(2), t(3));
    /// let args = AttentionArgs { causal: true, ..Default::default() };
    /// let y = q.attention(&k, &v, args).unwrap();
    /// assert_eq!(y.shape(), &[2, 4, 8]);
    /// y.sum(None, false).unwrap().backward().unwrap();
    /// assert!(q.grad().is_some() && k.grad().is_some() && v.grad().is_some());
    /// ```
    pub fn attention(&self, k: &Var, v: &Var, args: AttentionArgs) -> Result<Var> {
        if let Some(c) = crate::autocast::cast_inputs("attention", &[self, k, v])? {
            return c[0].attention(&c[1], &c[2], args);
        }
        let (qs, ks, vs) = (self.shape(), k.shape(), v.shape());
        if qs.len() < 2 || ks.len() < 2 || vs.len() < 2 {
            return Err(shape_err(format!(
                "q, k and v need at least 2 dims, got {qs:?}, {ks:?}, {vs:?}"
            )));
        }
        let (e, s) = (qs[qs.len() - 1], ks[ks.len() - 2]);
        if ks[ks.len() - 1] != e || vs[vs.len() - 2] != s {
            return Err(shape_err(format!(
                "q [.., L, E], k [.., S, E], v [.., S, Ev] expected, got {qs:?}, {ks:?}, {vs:?}"
            )));
        }
        // With an empty embedding dim (E = 0) every score is an empty sum,
        // exactly 0 whatever the scale: PyTorch multiplies q and k by
        // sqrt(scale) each before their product, so even its default scale
        // 1/sqrt(0) = inf (or a given inf or NaN) leaves the scores 0 and
        // the output the mean of the values (of the unmasked ones, causal).
        // Without queries or keys (L = 0 or S = 0) there are no scores
        // either, and the scale changes nothing (PyTorch: an empty output,
        // or zeros, and zero gradients, whatever the scale).
        let l = qs[qs.len() - 2];
        let scale = if e == 0 || l == 0 || s == 0 {
            1.0
        } else {
            args.scale.unwrap_or(1.0 / (e as f64).sqrt())
        };
        let causal = args.causal;
        // The probabilities in `dtype` (`None`: the scores' dtype). A scale
        // that is not finite makes every score, so every probability, NaN
        // (PyTorch's math: `q sqrt(scale) @ (k sqrt(scale))ᵀ` is inf or NaN,
        // and softmax of a row holding them NaN), and so every output and,
        // through the scaled gradients, every gradient.
        //
        // As PyTorch's eager graph, `softmax(masked_fill(scores * scale,
        // mask, -inf))`: the scaled scores rounded to their dtype (in place:
        // a fresh GEMM output), the causal mask filled in, then the plain
        // softmax, whose f32 kernel along the last dim is PyTorch's exactly.
        // The fused `scaled_softmax(scale, causal)` computed the scaled
        // scores unrounded, in its generic kernel: probabilities a last bit
        // off PyTorch's (seed 340, program 612).
        let probs = move |q: &Tensor, k: &Tensor, dtype: Option<DType>| -> Result<Tensor> {
            let scores = q.matmul(&k.transpose(-2, -1)?)?;
            if !scale.is_finite() {
                return Ok(scores.scaled_softmax(1.0, causal, dtype)?.mul(f64::NAN)?);
            }
            // On a GPU no kernel is PyTorch's bit for bit: the fused pass
            // (one kernel instead of a scaling, a mask and a softmax) stays.
            if scores.device() != strata_tensor::Device::Cpu {
                return Ok(scores.scaled_softmax(scale, causal, dtype)?);
            }
            if scale != 1.0 {
                scores.mul_(scale)?;
            }
            if causal {
                let (l, s) = (
                    scores.shape()[scores.ndim() - 2],
                    scores.shape()[scores.ndim() - 1],
                );
                let mask = Tensor::ones(&[l, s], DType::Bool, scores.device())?.triu(1)?;
                scores.masked_fill_(&mask, f64::NEG_INFINITY)?;
            }
            Ok(scores.softmax(-1, dtype)?)
        };
        // Under autocast, a half-precision op's softmax gradient is formed
        // in f32 (module documentation).
        let low = self.dtype();
        let f32_probs = matches!(low, DType::F16 | DType::BF16)
            && is_autocast_enabled(DeviceType::of(self.device()));
        let keep_p = args.saving == AttentionSaving::SaveProbs;
        let pieces = if keep_p {
            vec![]
        } else {
            batch_pieces(qs, ks, vs, self.dtype().size())
        };
        let (out, p) = if pieces.len() > 1 {
            // One piece of the batch at a time: its probabilities are freed
            // before the next piece's are formed.
            let v_t = v.data();
            let mut os = qs[..qs.len() - 1].to_vec();
            os.push(vs[vs.len() - 1]);
            let out = Tensor::empty(&os, self.dtype(), self.device())?;
            for &(at, len) in &pieces {
                let piece = |t: &Tensor| t.narrow(0, at as i64, len as i64);
                let p = probs(&piece(self.data())?, &piece(k.data())?, None)?;
                piece(&out)?.copy_(&p.matmul(&piece(v_t)?)?)?;
            }
            (out, None)
        } else if keep_p && f32_probs {
            // Keep the f32 probabilities for backward (PyTorch's autocast
            // graph keeps softmax's f32 output); `p @ v` takes them rounded.
            let p32 = probs(self.data(), k.data(), Some(DType::F32))?;
            (p32.to_dtype_contiguous(low)?.matmul(v.data())?, Some(p32))
        } else {
            let p = probs(self.data(), k.data(), None)?;
            (p.matmul(v.data())?, Some(p))
        };
        let (q_t, k_t, v_t) = (self.data().clone(), k.data().clone(), v.data().clone());
        let saved = move || {
            let mut s = vec![q_t, k_t, v_t];
            if keep_p {
                s.extend(p);
            }
            s
        };
        let (qs, ks, vs) = (qs.to_vec(), ks.to_vec(), vs.to_vec());
        let (qd, kd, vd) = (self.dtype(), k.dtype(), v.dtype());
        let out_dtype = out.dtype();
        let f = formula(move |g, s, needs| {
            let g = g.to_dtype_contiguous(out_dtype)?;
            // The gradients of one piece (or of the whole batch): each
            // piece's probabilities, dp and ds are freed before the next's.
            let grads = |q: &Tensor, k: &Tensor, v: &Tensor, g: &Tensor, p: Option<&Tensor>| {
                // `p` in the dtype its softmax gradient is formed in.
                let p = match p {
                    Some(p) => p.clone(),
                    None => probs(q, k, f32_probs.then_some(DType::F32))?,
                };
                let dv = if needs[2] {
                    Some(p.to_dtype_contiguous(low)?.transpose(-2, -1)?.matmul(g)?)
                } else {
                    None
                };
                if !needs[0] && !needs[1] {
                    return Ok::<_, crate::AutogradError>([None, None, dv]);
                }
                // ds is written over dp (a fresh GEMM output): two
                // score-sized tensors alive here, not three. Under autocast
                // it is formed in f32 and rounded once.
                let ds = g.matmul(&v.transpose(-2, -1)?)?;
                let ds = if p.dtype() == ds.dtype() {
                    p.softmax_backward_inplace(&ds, -1)?;
                    ds
                } else {
                    let ds32 = ds.to_dtype_contiguous(p.dtype())?;
                    drop(ds);
                    p.softmax_backward_inplace(&ds32, -1)?;
                    ds32.to_dtype_contiguous(low)?
                };
                drop(p);
                // The masked scores' gradient is exactly 0, as PyTorch's
                // `masked_fill` backward makes it: `p (dp - sum(dp p))` is 0
                // there only while `dp` is finite (a NaN or infinite
                // upstream gradient gave NaN, which `ds k` spread to `dq`).
                let ds = if causal {
                    let masked = ds.tril(0)?;
                    drop(ds);
                    masked
                } else {
                    ds
                };
                let scaled = |t: Tensor| -> Result<Tensor> {
                    t.mul_(scale)?;
                    Ok(t)
                };
                let dq = if needs[0] {
                    Some(scaled(ds.matmul(k)?)?)
                } else {
                    None
                };
                let dk = if needs[1] {
                    Some(scaled(ds.transpose(-2, -1)?.matmul(q)?)?)
                } else {
                    None
                };
                Ok([dq, dk, dv])
            };
            let (q, k, v) = (&s[0], &s[1], &s[2]);
            let pieces = if keep_p {
                vec![]
            } else {
                batch_pieces(&qs, &ks, &vs, q.dtype().size())
            };
            let [dq, dk, dv] = if pieces.len() > 1 {
                // Equal batch dims (no broadcasting): each gradient is
                // assembled piece by piece in a tensor of its input's shape.
                let full = |need: bool, t: &Tensor| {
                    need.then(|| Tensor::empty(t.shape(), t.dtype(), t.device()))
                        .transpose()
                };
                let outs = [full(needs[0], q)?, full(needs[1], k)?, full(needs[2], v)?];
                for &(at, len) in &pieces {
                    let piece = |t: &Tensor| t.narrow(0, at as i64, len as i64);
                    let gp = grads(&piece(q)?, &piece(k)?, &piece(v)?, &piece(&g)?, None)?;
                    for (o, gp) in outs.iter().zip(gp) {
                        if let (Some(o), Some(gp)) = (o, gp) {
                            piece(o)?.copy_(&gp)?;
                        }
                    }
                }
                outs
            } else {
                grads(q, k, v, &g, s.get(3))?
            };
            Ok(vec![
                dq.map(|t| sum_to(&t, &qs, qd)).transpose()?,
                dk.map(|t| sum_to(&t, &ks, kd)).transpose()?,
                dv.map(|t| sum_to(&t, &vs, vd)).transpose()?,
            ])
        });
        let name = if keep_p {
            "AttentionBackward"
        } else {
            "AttentionRecomputeBackward"
        };
        record(name, out, &[Some(self), Some(k), Some(v)], saved, f, false)
    }
}

#[cfg(test)]
mod tests {
    use super::batch_pieces;

    #[test]
    fn the_batch_is_split_only_when_large_and_not_broadcast() {
        // [8, 12, 1024, 1024] f32 probabilities (400 MB): four pieces of 2.
        let (q, v) = ([8, 12, 1024, 64], [8, 12, 1024, 64]);
        assert_eq!(
            batch_pieces(&q, &q, &v, 4),
            vec![(0, 2), (2, 2), (4, 2), (6, 2)]
        );
        // Odd batch: the last piece is shorter.
        let q5 = [5, 12, 1024, 64];
        assert_eq!(batch_pieces(&q5, &q5, &q5, 4), vec![(0, 2), (2, 2), (4, 1)]);
        // 2 MiB of probabilities: two pieces.
        let q2 = [2, 4, 512, 64];
        assert_eq!(batch_pieces(&q2, &q2, &q2, 1), vec![(0, 1), (1, 1)]);
        // Small, broadcast, or without batch dims: whole.
        assert_eq!(
            batch_pieces(&[8, 4, 4], &[8, 4, 4], &[8, 4, 4], 4),
            vec![(0, 8)]
        );
        let k1 = [1, 12, 1024, 64];
        assert_eq!(batch_pieces(&q, &k1, &k1, 4), vec![(0, 8)]);
        assert_eq!(
            batch_pieces(&[1024, 64], &[1024, 64], &[1024, 64], 4),
            vec![(0, 1024)]
        );
    }
}
