//! Recorded operations on [`Var`](crate::Var)s, grouped by kind, and the
//! helpers that reduce a broadcast gradient back to an input's shape and
//! broadcast a reduction's gradient back over its reduced dims.

mod binary;
mod cast;
pub(crate) mod copy_slices;
mod extrema;
pub(crate) use extrema::vector_norm;
mod inplace;
mod linear;
mod math;
// ---- session 74: the rest of the element-wise math ----
mod activations;
mod composite;
mod conv;
mod elementary;
mod matmul;
mod norms;
mod overloads;
mod pointwise_losses;
mod reduce;
mod scatter_ops;
mod shape_ops;
mod similarity;
mod sort;
mod unary;
mod view;

// ---- issue 12: nn, indexing, joining (branch nn) ----
mod index;
mod join;
pub(crate) mod nn;

// ---- issue 13: attention with its probabilities recomputed in backward ----
pub(crate) mod attention;

// ---- session 60: einsum, diagonals, scaled products, lerp, cross ----
mod contract;

// ---- session 78: losses, activations, reductions and math PyTorch users reach for ----
mod composite_losses;
mod gated_activations;
mod nan_moments;
mod pair_math;

// ---- session 78: cdist, diff, meshgrid, cartesian_prod ----
pub(crate) mod cdist;
mod grids;
// ---- session 79 (helper 134): shape, join, statistics and nn ops ----
mod nn_more;
mod shape_join;
mod statistics;

use crate::error::Result;
use strata_tensor::{DType, Tensor};

/// Sums `g` over the dims that broadcasting stretched so that it has `shape`,
/// and converts it to `dtype` (the input's, when type promotion widened the result).
pub(crate) fn sum_to(g: &Tensor, shape: &[usize], dtype: DType) -> Result<Tensor> {
    let g = if g.shape() == shape {
        g.clone()
    } else {
        let lead = g.ndim().saturating_sub(shape.len());
        let dims: Vec<i64> = (0..g.ndim())
            .filter(|&i| i < lead || (shape[i - lead] == 1 && g.shape()[i] != 1))
            .map(|i| i as i64)
            .collect();
        let reduced = if dims.is_empty() {
            g.clone()
        } else {
            g.sum(Some(&dims), true)?
        };
        let target: Vec<i64> = shape.iter().map(|&s| s as i64).collect();
        reduced.reshape(&target)?
    };
    Ok(if g.dtype() == dtype {
        g
    } else {
        g.to_dtype_contiguous(dtype)?
    })
}

/// `t` (the result of a reduction over the sorted `dims`) with those dims
/// as size 1: unsqueezed back where `keepdim` dropped them.
pub(crate) fn kept(t: &Tensor, dims: &[usize], keepdim: bool) -> Result<Tensor> {
    let mut t = t.clone();
    if !keepdim {
        for &d in dims {
            t = t.unsqueeze(d as i64)?;
        }
    }
    Ok(t)
}

/// `t` (the result, or the gradient of the result, of a reduction over the
/// sorted `dims` of a tensor of `shape`) broadcast back to `shape`.
pub(crate) fn expand_back(
    t: &Tensor,
    shape: &[usize],
    dims: &[usize],
    keepdim: bool,
) -> Result<Tensor> {
    Ok(kept(t, dims, keepdim)?.broadcast_to(shape)?)
}

/// What a product of `a` and `b` saves for its backward: each factor's
/// gradient needs the other one, so `b` when `a` requires grad, then `a`
/// when `b` does (the formulas find the second at `s[a_req as usize]`).
pub(crate) fn save_partners<'a>(
    a: &'a crate::var::Var,
    b: &'a crate::var::Var,
) -> impl FnOnce() -> Vec<Tensor> + 'a {
    move || {
        let mut v = Vec::new();
        if a.requires_grad() {
            v.push(b.data().clone());
        }
        if b.requires_grad() {
            v.push(a.data().clone());
        }
        v
    }
}

/// A boxed backward formula (helps type inference of closures).
pub(crate) fn formula<F>(f: F) -> crate::node::BackwardFn
where
    F: Fn(&Tensor, &[Tensor], &[bool]) -> Result<Vec<Option<Tensor>>> + Send + Sync + 'static,
{
    Box::new(f)
}

// ---- session 79 (helper 132): torch.linalg ----
pub mod linalg;

// ---- session 79 (helper 133): special functions and element-wise math ----
mod special_math;
