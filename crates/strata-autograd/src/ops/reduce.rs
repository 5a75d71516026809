//! Reductions: sum and mean over dims (all when `None`), with `keepdim`.
//! Their backward broadcasts the gradient back over the reduced dims.

use super::formula;
use crate::error::Result;
use crate::var::{record, Var};
use strata_tensor::Tensor;

/// The reduced dims (normalised, sorted) of a reduction of `ndim` dims.
fn reduced(dims: Option<&[i64]>, ndim: usize) -> Vec<usize> {
    match dims {
        // A 0-d tensor accepts dim 0 / -1 but has no dim to reduce.
        _ if ndim == 0 => Vec::new(),
        Some(ds) if !ds.is_empty() => {
            let mut v: Vec<usize> = ds
                .iter()
                .map(|&d| if d < 0 { d + ndim as i64 } else { d } as usize)
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        }
        _ => (0..ndim).collect(),
    }
}

/// `g` (the gradient of a reduction's output) broadcast back to `shape`.
fn expand_back(g: &Tensor, shape: &[usize], dims: &[usize], keepdim: bool) -> Result<Tensor> {
    let mut g = g.clone();
    if !keepdim {
        for &d in dims {
            g = g.unsqueeze(d as i64)?;
        }
    }
    Ok(g.broadcast_to(shape)?)
}

impl Var {
    /// Sum over `dims` (all when `None` or empty).
    pub fn sum(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Var> {
        if let Some(c) = crate::autocast::cast_inputs("sum", &[self])? {
            return c[0].sum(dims, keepdim);
        }
        // The tensor op validates the dims; by then they are in range.
        let out = self.data().sum(dims, keepdim)?;
        let shape = self.shape().to_vec();
        let dims = reduced(dims, shape.len());
        let f = formula(move |g, _s, _n| Ok(vec![Some(expand_back(g, &shape, &dims, keepdim)?)]));
        Ok(record(
            "SumBackward",
            out,
            &[Some(self)],
            Vec::new,
            f,
            false,
        ))
    }

    /// Mean over `dims` (all when `None` or empty).
    pub fn mean(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Var> {
        if let Some(c) = crate::autocast::cast_inputs("mean", &[self])? {
            return c[0].mean(dims, keepdim);
        }
        let out = self.data().mean(dims, keepdim)?;
        let shape = self.shape().to_vec();
        let dims = reduced(dims, shape.len());
        let count: usize = dims.iter().map(|&d| shape[d]).product();
        let f = formula(move |g, _s, _n| {
            let g = g.div(count as f64)?;
            Ok(vec![Some(expand_back(&g, &shape, &dims, keepdim)?)])
        });
        Ok(record(
            "MeanBackward",
            out,
            &[Some(self)],
            Vec::new,
            f,
            false,
        ))
    }
}
