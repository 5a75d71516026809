//! Indexing ops (issue 12) and the gradient of `where`. Saved tensors are
//! the indices only (embedding, index_select, gather), or the mask
//! (masked_fill, where); the backward of a gather is a scatter-add into
//! zeros, and the backward of a scatter-add is a gather.

use super::{formula, sum_to};
use crate::error::Result;
use crate::var::{record, Var};
use strata_tensor::{DType, Operand, Tensor};

impl Var {
    /// `torch.index_select(self, dim, index)`; saves the index.
    pub fn index_select(&self, dim: i64, index: &Tensor) -> Result<Var> {
        let out = self.data().index_select(dim, index)?;
        let (shape, dtype) = (self.shape().to_vec(), self.dtype());
        let idx = index.clone();
        let saved = move || vec![idx];
        let f = formula(move |g, s, _n| {
            let z = Tensor::zeros(&shape, dtype, g.device())?;
            if shape.is_empty() {
                return Ok(vec![Some(g.reshape(&[])?.add(&z)?)]);
            }
            let d = if dim < 0 {
                dim + shape.len() as i64
            } else {
                dim
            };
            // index_select's gradient: scatter-add g's slices at the index
            // (scatter_add takes an int64 index; index_select also int32).
            let idx = s[0].to_dtype_contiguous(DType::I64)?.reshape(&[-1])?;
            let mut view = vec![1i64; shape.len()];
            view[d as usize] = idx.numel() as i64;
            let full: Vec<i64> = g.shape().iter().map(|&x| x as i64).collect();
            let index = idx.reshape(&view)?.expand(&full)?;
            Ok(vec![Some(z.scatter_add(d, &index, g)?)])
        });
        record("IndexSelectBackward", out, &[Some(self)], saved, f, false)
    }

    /// `torch.gather(self, dim, index)`; saves the index, backward
    /// scatter-adds into zeros.
    pub fn gather(&self, dim: i64, index: &Tensor) -> Result<Var> {
        let out = self.data().gather(dim, index)?;
        let (shape, dtype) = (self.shape().to_vec(), self.dtype());
        let idx = index.clone();
        let saved = move || vec![idx];
        let f = formula(move |g, s, _n| {
            let z = Tensor::zeros(&shape, dtype, g.device())?;
            Ok(vec![Some(z.scatter_add(
                dim,
                &s[0],
                &g.reshape(&s[0].shape().iter().map(|&x| x as i64).collect::<Vec<_>>())?,
            )?)])
        });
        record("GatherBackward", out, &[Some(self)], saved, f, false)
    }

    /// `torch.scatter_add(self, dim, index, src)`: the gradient of self is
    /// the upstream gradient, that of src its gather at the index.
    pub fn scatter_add(&self, dim: i64, index: &Tensor, src: &Var) -> Result<Var> {
        let out = self.data().scatter_add(dim, index, src.data())?;
        let idx = index.clone();
        let (src_shape, src_dtype) = (src.shape().to_vec(), src.dtype());
        let saved = move || vec![idx];
        let f = formula(move |g, s, needs| {
            let gs = if needs[1] {
                let part = g.gather(dim, &s[0])?.to_dtype(src_dtype)?;
                Some(super::scatter_ops::pad_to(&part, &src_shape)?)
            } else {
                None
            };
            Ok(vec![needs[0].then(|| g.clone()), gs])
        });
        record(
            "ScatterAddBackward",
            out,
            &[Some(self), Some(src)],
            saved,
            f,
            false,
        )
    }

    /// `F.embedding(indices, weight, padding_idx)` with `self` the weight
    /// (V, D); saves the indices. The weight's gradient is a dense
    /// scatter-add of the upstream rows (rows at `padding_idx` get none).
    pub fn embedding(&self, indices: &Tensor, padding_idx: Option<i64>) -> Result<Var> {
        let out = Tensor::embedding(indices, self.data(), padding_idx)?;
        let (shape, dtype) = (self.shape().to_vec(), self.dtype());
        let idx = indices.clone();
        let saved = move || vec![idx];
        let f = formula(move |g, s, _n| {
            let v = shape[0] as i64;
            let d = shape[1];
            let idx = s[0].to_dtype_contiguous(DType::I64)?.reshape(&[-1])?;
            // The row count named: `[-1, 0]` is ambiguous for a weight of
            // embedding_dim 0.
            let g2 = g.reshape(&[idx.numel() as i64, d as i64])?;
            let z = Tensor::zeros(&shape, dtype, g.device())?;
            let g2 = match padding_idx {
                Some(p) => {
                    let p = if p < 0 { p + v } else { p };
                    let pad = idx.eq(p)?.unsqueeze(1)?;
                    g2.masked_fill(&pad, 0.0)?
                }
                None => g2,
            };
            let index = idx.unsqueeze(1)?.expand(&[-1, d as i64])?;
            Ok(vec![Some(z.scatter_add(0, &index, &g2)?)])
        });
        record("EmbeddingBackward", out, &[Some(self)], saved, f, false)
    }

    /// `torch.masked_fill(self, mask, value)` with a scalar value; the
    /// gradient is zero where the mask is set.
    pub fn masked_fill(
        &self,
        mask: &Tensor,
        value: impl Into<strata_tensor::Scalar>,
    ) -> Result<Var> {
        let out = self
            .data()
            .masked_fill(mask, Operand::Scalar(value.into()))?;
        let (shape, dtype) = (self.shape().to_vec(), self.dtype());
        let m = mask.clone();
        let saved = move || vec![m];
        let f = formula(move |g, s, _n| {
            let z = Tensor::zeros(&[], g.dtype(), g.device())?;
            Ok(vec![Some(sum_to(
                &Tensor::where_cond(&s[0], &z, g)?,
                &shape,
                dtype,
            )?)])
        });
        record("MaskedFillBackward", out, &[Some(self)], saved, f, false)
    }

    /// `torch.masked_select(self, mask)`; saves the mask. The gradient
    /// scatters the upstream gradient back to the selected positions of
    /// zeros of the broadcast shape (`masked_scatter`), summed back to
    /// self's shape where self was broadcast.
    pub fn masked_select(&self, mask: &Tensor) -> Result<Var> {
        let out = self.data().masked_select(mask)?;
        let (shape, dtype) = (self.shape().to_vec(), self.dtype());
        let m = mask.clone();
        let saved = move || vec![m];
        let f = formula(move |g, s, _n| {
            let full =
                strata_tensor::shape::broadcast_shapes("masked_select", &shape, s[0].shape())?;
            let z = Tensor::zeros(&full, g.dtype(), g.device())?;
            Ok(vec![Some(sum_to(
                &z.masked_scatter(&s[0], g)?,
                &shape,
                dtype,
            )?)])
        });
        record("MaskedSelectBackward", out, &[Some(self)], saved, f, false)
    }

    /// `torch.where(cond, a, b)` with gradients for both branches (summed
    /// back over broadcast dims); saves the condition.
    pub fn where_cond(cond: &Tensor, a: &Var, b: &Var) -> Result<Var> {
        let out = Tensor::where_cond(cond, a.data(), b.data())?;
        let (sa, da, sb, db) = (a.shape().to_vec(), a.dtype(), b.shape().to_vec(), b.dtype());
        let c = cond.clone();
        let saved = move || vec![c];
        let f = formula(move |g, s, needs| {
            let z = Tensor::zeros(&[], g.dtype(), g.device())?;
            let ga = if needs[0] {
                Some(sum_to(&Tensor::where_cond(&s[0], g, &z)?, &sa, da)?)
            } else {
                None
            };
            let gb = if needs[1] {
                Some(sum_to(&Tensor::where_cond(&s[0], &z, g)?, &sb, db)?)
            } else {
                None
            };
            Ok(vec![ga, gb])
        });
        record("WhereBackward", out, &[Some(a), Some(b)], saved, f, false)
    }

    /// `torch.triu(self, diagonal)`; the gradient is `triu` of the gradient.
    pub fn triu(&self, diagonal: i64) -> Result<Var> {
        let out = self.data().triu(diagonal)?;
        let f = formula(move |g, _s, _n| Ok(vec![Some(g.triu(diagonal)?)]));
        record("TriuBackward", out, &[Some(self)], Vec::new, f, false)
    }

    /// `torch.tril(self, diagonal)`; the gradient is `tril` of the gradient.
    pub fn tril(&self, diagonal: i64) -> Result<Var> {
        let out = self.data().tril(diagonal)?;
        let f = formula(move |g, _s, _n| Ok(vec![Some(g.tril(diagonal)?)]));
        record("TrilBackward", out, &[Some(self)], Vec::new, f, false)
    }
}
