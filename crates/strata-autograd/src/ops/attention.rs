//! The core of (naive) scaled dot-product attention as one recorded op:
//! `y = softmax(mask(q kᵀ · scale), -1) v`, the math of PyTorch's eager
//! `softmax(masked_fill(q @ k.transpose(-2, -1) / sqrt(d), mask, -inf)) @ v`
//! with the scale and the causal mask fused into the softmax pass
//! ([`Tensor::scaled_softmax`]).
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
//! the op-by-op graph feeds to `p @ v` (that graph keeps an f32 copy of `p`
//! for softmax's backward as well; this op's backward uses the rounded `p`).

use super::{formula, sum_to};
use crate::error::Result;
use crate::var::{record, Var};
use strata_tensor::{Tensor, TensorError};

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
    /// v`, `[.., L, Ev]`. See the [module documentation](self) for what is
    /// saved and how the gradients are formed.
    ///
    /// Errors (typed): operands with fewer than 2 dims, mismatched inner
    /// sizes, dtypes or devices, a scale that is not finite.
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
        let scale = args.scale.unwrap_or(1.0 / (e as f64).sqrt());
        let causal = args.causal;
        let probs = move |q: &Tensor, k: &Tensor| -> Result<Tensor> {
            Ok(q.matmul(&k.transpose(-2, -1)?)?
                .scaled_softmax(scale, causal, None)?)
        };
        let p = probs(self.data(), k.data())?;
        let out = p.matmul(v.data())?;
        let keep_p = args.saving == AttentionSaving::SaveProbs;
        let (q_t, k_t, v_t) = (self.data().clone(), k.data().clone(), v.data().clone());
        let saved = move || {
            let mut s = vec![q_t, k_t, v_t];
            if keep_p {
                s.push(p);
            }
            s
        };
        let (qs, ks, vs) = (qs.to_vec(), ks.to_vec(), vs.to_vec());
        let (qd, kd, vd) = (self.dtype(), k.dtype(), v.dtype());
        let out_dtype = out.dtype();
        let f = formula(move |g, s, needs| {
            let (q, k, v) = (&s[0], &s[1], &s[2]);
            let g = g.to_dtype(out_dtype)?;
            let p = if keep_p { s[3].clone() } else { probs(q, k)? };
            let dv = if needs[2] {
                Some(sum_to(&p.transpose(-2, -1)?.matmul(&g)?, &vs, vd)?)
            } else {
                None
            };
            if !needs[0] && !needs[1] {
                return Ok(vec![None, None, dv]);
            }
            // ds is written over dp (a fresh GEMM output): two score-sized
            // tensors alive here, not three.
            let ds = g.matmul(&v.transpose(-2, -1)?)?;
            p.softmax_backward_inplace(&ds, -1)?;
            drop(p);
            let dq = if needs[0] {
                Some(sum_to(&ds.matmul(k)?.mul(scale)?, &qs, qd)?)
            } else {
                None
            };
            let dk = if needs[1] {
                Some(sum_to(
                    &ds.transpose(-2, -1)?.matmul(q)?.mul(scale)?,
                    &ks,
                    kd,
                )?)
            } else {
                None
            };
            Ok(vec![dq, dk, dv])
        });
        let name = if keep_p {
            "AttentionBackward"
        } else {
            "AttentionRecomputeBackward"
        };
        Ok(record(
            name,
            out,
            &[Some(self), Some(k), Some(v)],
            saved,
            f,
            false,
        ))
    }
}
