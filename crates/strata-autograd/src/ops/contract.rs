//! Session 60's contractions, diagonals, scaled products, `lerp` and
//! `cross` on [`Var`]s.
//!
//! `einsum`, `tensordot`, `inner`, `outer` and `kron` run strata-tensor's
//! own algorithm (`strata_tensor::contract`) over `Var`s, so their
//! gradients are those of the views, sums, products and matrix products
//! they are made of (PyTorch's einsum is a composite too). `diagonal` is a
//! recorded view; the others record one node each with PyTorch's formulas.

use super::copy_slices::ViewStep;
use super::{formula, save_partners, sum_to};
use crate::error::Result;
use crate::var::{record, record_view, Var, VarOperand};
use strata_tensor::contract::{self, TensordotDims};
use strata_tensor::{DType, Scalar, Tensor, TensorError};

/// `g * s`, skipping a multiplication by one.
fn scaled(g: &Tensor, s: Scalar) -> Result<Tensor> {
    let one = match s {
        Scalar::Bool(b) => b,
        Scalar::Int(i) => i == 1,
        Scalar::Float(f) => f == 1.0,
    };
    Ok(if one { g.clone() } else { g.mul(s)? })
}

/// `zeros(shape)` with `src` written on its `(offset, dim1, dim2)`
/// diagonal (the gradient of a diagonal view).
fn embed_diagonal(
    src: &Tensor,
    shape: &[usize],
    dtype: DType,
    offset: i64,
    dim1: i64,
    dim2: i64,
) -> Result<Tensor> {
    let full = Tensor::zeros(shape, dtype, src.device())?;
    full.diagonal(offset, dim1, dim2)?.copy_(src)?;
    Ok(full)
}

impl ViewStep {
    /// The step of `diagonal(offset, dim1, dim2)` of an input of `shape`.
    fn diagonal(offset: i64, dim1: i64, dim2: i64, shape: &[usize], dtype: DType) -> ViewStep {
        ViewStep::Diagonal {
            offset,
            dim1,
            dim2,
            shape: shape.to_vec(),
            dtype,
        }
    }
}

/// The gradient of a `diagonal` view (see `ViewStep::Diagonal`).
pub(crate) fn diagonal_backward(
    g: &Tensor,
    offset: i64,
    dim1: i64,
    dim2: i64,
    shape: &[usize],
    dtype: DType,
) -> Result<Tensor> {
    embed_diagonal(g, shape, dtype, offset, dim1, dim2)
}

impl Var {
    /// A view of a diagonal ([`Tensor::diagonal`]); its gradient is written
    /// on the same diagonal of zeros. An in-place op on it reaches the base,
    /// as on other views.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{DType, Device, Tensor};
    /// let a = Var::parameter(Tensor::ones(&[2, 3], DType::F64, Device::Cpu).unwrap()).unwrap();
    /// a.diagonal(1, 0, 1).unwrap().sum(None, false).unwrap().backward().unwrap();
    /// assert_eq!(a.grad().unwrap().to_vec::<f64>().unwrap(), vec![0., 1., 0., 0., 0., 1.]);
    /// ```
    pub fn diagonal(&self, offset: i64, dim1: i64, dim2: i64) -> Result<Var> {
        let out = self.data().diagonal(offset, dim1, dim2)?;
        let step = ViewStep::diagonal(offset, dim1, dim2, self.shape(), self.dtype());
        record_view("DiagonalBackward", out, self, step, true)
    }

    /// [`Tensor::einsum`] with gradients: the same contraction, recorded as
    /// the views, sums, products and batched matrix products it is made of.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{DType, Device, Tensor};
    /// let a = Var::parameter(Tensor::ones(&[2, 3], DType::F32, Device::Cpu).unwrap()).unwrap();
    /// let b = Var::parameter(Tensor::ones(&[3, 4], DType::F32, Device::Cpu).unwrap()).unwrap();
    /// let c = Var::einsum("ij,jk->ik", &[&a, &b]).unwrap();
    /// c.sum(None, false).unwrap().backward().unwrap();
    /// assert_eq!(a.grad().unwrap().to_vec::<f32>().unwrap(), vec![4.0; 6]);
    /// ```
    pub fn einsum(equation: &str, operands: &[&Var]) -> Result<Var> {
        let ops: Vec<Var> = operands.iter().map(|&v| v.clone()).collect();
        if let Some(w) = ops.windows(2).find(|w| w[0].device() != w[1].device()) {
            return Err(TensorError::DeviceMismatch {
                op: "einsum",
                lhs: w[0].device(),
                rhs: w[1].device(),
            }
            .into());
        }
        contract::einsum(equation, &ops)
    }

    /// [`Tensor::tensordot`] with gradients (views, sums and one matrix
    /// product, recorded).
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{DType, Device, Tensor};
    /// let a = Var::parameter(Tensor::ones(&[2, 3], DType::F32, Device::Cpu).unwrap()).unwrap();
    /// let c = a.tensordot(&a, (&[1i64], &[1i64])).unwrap();
    /// assert_eq!(c.shape(), &[2, 2]);
    /// ```
    pub fn tensordot<'a>(&self, other: &Var, dims: impl Into<TensordotDims<'a>>) -> Result<Var> {
        contract::tensordot(self, other, dims.into())
    }

    /// [`Tensor::inner`] (PyTorch's `torch.inner`) with gradients; named
    /// `inner_product` because `Var::inner` is taken inside this crate.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{DType, Device, Tensor};
    /// let a = Var::parameter(Tensor::ones(&[3], DType::F32, Device::Cpu).unwrap()).unwrap();
    /// a.inner_product(&a).unwrap().backward().unwrap();
    /// assert_eq!(a.grad().unwrap().to_vec::<f32>().unwrap(), vec![2.0; 3]);
    /// ```
    pub fn inner_product(&self, other: &Var) -> Result<Var> {
        contract::inner(self, other)
    }

    /// [`Tensor::outer`] with gradients.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{DType, Device, Tensor};
    /// let a = Var::parameter(Tensor::ones(&[2], DType::F32, Device::Cpu).unwrap()).unwrap();
    /// let b = Var::new(Tensor::ones(&[3], DType::F32, Device::Cpu).unwrap());
    /// a.outer(&b).unwrap().sum(None, false).unwrap().backward().unwrap();
    /// assert_eq!(a.grad().unwrap().to_vec::<f32>().unwrap(), vec![3.0; 2]);
    /// ```
    pub fn outer(&self, vec2: &Var) -> Result<Var> {
        contract::outer(self, vec2)
    }

    /// [`Tensor::kron`] with gradients.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{DType, Device, Tensor};
    /// let a = Var::parameter(Tensor::ones(&[2], DType::F32, Device::Cpu).unwrap()).unwrap();
    /// let b = Var::new(Tensor::ones(&[3], DType::F32, Device::Cpu).unwrap());
    /// assert_eq!(a.kron(&b).unwrap().shape(), &[6]);
    /// ```
    pub fn kron(&self, other: &Var) -> Result<Var> {
        contract::kron(self, other)
    }

    /// [`Tensor::diag`] with gradients (the diagonal of the gradient for a
    /// 1-D input; the gradient written on a diagonal of zeros for a 2-D
    /// one).
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{DType, Device, Tensor};
    /// let v = Var::parameter(Tensor::ones(&[2], DType::F32, Device::Cpu).unwrap()).unwrap();
    /// v.diag(0).unwrap().sum(None, false).unwrap().backward().unwrap();
    /// assert_eq!(v.grad().unwrap().to_vec::<f32>().unwrap(), vec![1.0, 1.0]);
    /// ```
    pub fn diag(&self, diagonal: i64) -> Result<Var> {
        let out = self.data().diag(diagonal)?;
        let (shape, dtype, nd) = (self.shape().to_vec(), self.dtype(), self.ndim());
        let f = formula(move |g, _s, _n| {
            let d = if nd == 1 {
                g.diagonal(diagonal, 0, 1)?.clone_contiguous()?
            } else {
                embed_diagonal(g, &shape, dtype, diagonal, 0, 1)?
            };
            Ok(vec![Some(d)])
        });
        record("DiagBackward", out, &[Some(self)], Vec::new, f, false)
    }

    /// [`Tensor::diagflat`](strata_tensor::Tensor::diagflat): `diag` of the
    /// flattened variable (its gradient, the diagonal, reshaped back).
    pub fn diagflat(&self, offset: i64) -> Result<Var> {
        self.reshape(&[-1])?.diag(offset)
    }

    /// [`Tensor::diag_embed`] with gradients (the gradient's diagonal).
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{DType, Device, Tensor};
    /// let v = Var::parameter(Tensor::ones(&[2, 3], DType::F32, Device::Cpu).unwrap()).unwrap();
    /// let e = v.diag_embed(0, -2, -1).unwrap();
    /// assert_eq!(e.shape(), &[2, 3, 3]);
    /// e.sum(None, false).unwrap().backward().unwrap();
    /// assert_eq!(v.grad().unwrap().to_vec::<f32>().unwrap(), vec![1.0; 6]);
    /// ```
    pub fn diag_embed(&self, offset: i64, dim1: i64, dim2: i64) -> Result<Var> {
        let out = self.data().diag_embed(offset, dim1, dim2)?;
        let f = formula(move |g, _s, _n| {
            Ok(vec![Some(
                g.diagonal(offset, dim1, dim2)?.clone_contiguous()?,
            )])
        });
        record("DiagEmbedBackward", out, &[Some(self)], Vec::new, f, false)
    }

    /// [`Tensor::trace`] with gradients (the gradient on the main diagonal
    /// of zeros).
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{DType, Device, Tensor};
    /// let a = Var::parameter(Tensor::ones(&[2, 2], DType::F32, Device::Cpu).unwrap()).unwrap();
    /// a.trace().unwrap().backward().unwrap();
    /// assert_eq!(a.grad().unwrap().to_vec::<f32>().unwrap(), vec![1., 0., 0., 1.]);
    /// ```
    pub fn trace(&self) -> Result<Var> {
        let out = self.data().trace()?;
        let (shape, dtype) = (self.shape().to_vec(), self.dtype());
        let f =
            formula(move |g, _s, _n| Ok(vec![Some(embed_diagonal(g, &shape, dtype, 0, 0, 1)?)]));
        record("TraceBackward", out, &[Some(self)], Vec::new, f, false)
    }

    /// [`Tensor::baddbmm`] with gradients: `beta * g` summed to `self`'s
    /// shape, `alpha * g @ batch2ᵀ`, `alpha * batch1ᵀ @ g`.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{DType, Device, Tensor};
    /// let c = Var::parameter(Tensor::ones(&[2], DType::F32, Device::Cpu).unwrap()).unwrap();
    /// let x = Var::new(Tensor::ones(&[3, 2, 4], DType::F32, Device::Cpu).unwrap());
    /// let y = Var::new(Tensor::ones(&[3, 4, 2], DType::F32, Device::Cpu).unwrap());
    /// c.baddbmm(&x, &y, 0.5, 1).unwrap().sum(None, false).unwrap().backward().unwrap();
    /// assert_eq!(c.grad().unwrap().to_vec::<f32>().unwrap(), vec![3.0, 3.0]);
    /// ```
    pub fn baddbmm(
        &self,
        batch1: &Var,
        batch2: &Var,
        beta: impl Into<Scalar>,
        alpha: impl Into<Scalar>,
    ) -> Result<Var> {
        let (beta, alpha) = (beta.into(), alpha.into());
        let out = self
            .data()
            .baddbmm(batch1.data(), batch2.data(), beta, alpha)?;
        let a_req = batch1.requires_grad();
        let saved = save_partners(batch1, batch2);
        let (c_shape, c_dtype) = (self.shape().to_vec(), self.dtype());
        let f = formula(move |g, s, needs| {
            let dc = if needs[0] {
                Some(sum_to(&scaled(g, beta)?, &c_shape, c_dtype)?)
            } else {
                None
            };
            let d1 = if needs[1] {
                Some(scaled(&g.bmm(&s[0].transpose(1, 2)?)?, alpha)?)
            } else {
                None
            };
            let d2 = if needs[2] {
                Some(scaled(&s[a_req as usize].transpose(1, 2)?.bmm(g)?, alpha)?)
            } else {
                None
            };
            Ok(vec![dc, d1, d2])
        });
        record(
            "BaddbmmBackward",
            out,
            &[Some(self), Some(batch1), Some(batch2)],
            saved,
            f,
            false,
        )
    }

    /// [`Tensor::addbmm`] with gradients: `beta * g` summed to `self`'s
    /// shape, `alpha * g @ batch2[b]ᵀ` and `alpha * batch1[b]ᵀ @ g` per batch.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{DType, Device, Tensor};
    /// let c = Var::new(Tensor::ones(&[2, 2], DType::F32, Device::Cpu).unwrap());
    /// let x = Var::parameter(Tensor::ones(&[3, 2, 4], DType::F32, Device::Cpu).unwrap()).unwrap();
    /// let y = Var::new(Tensor::ones(&[3, 4, 2], DType::F32, Device::Cpu).unwrap());
    /// c.addbmm(&x, &y, 1, 2).unwrap().sum(None, false).unwrap().backward().unwrap();
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), vec![4.0; 24]);
    /// ```
    pub fn addbmm(
        &self,
        batch1: &Var,
        batch2: &Var,
        beta: impl Into<Scalar>,
        alpha: impl Into<Scalar>,
    ) -> Result<Var> {
        let (beta, alpha) = (beta.into(), alpha.into());
        let out = self
            .data()
            .addbmm(batch1.data(), batch2.data(), beta, alpha)?;
        let a_req = batch1.requires_grad();
        let saved = save_partners(batch1, batch2);
        let (c_shape, c_dtype) = (self.shape().to_vec(), self.dtype());
        let bs = batch1.shape()[0] as i64;
        let f = formula(move |g, s, needs| {
            let dc = if needs[0] {
                Some(sum_to(&scaled(g, beta)?, &c_shape, c_dtype)?)
            } else {
                None
            };
            let gb = g
                .unsqueeze(0)?
                .expand(&[bs, g.shape()[0] as i64, g.shape()[1] as i64])?;
            let d1 = if needs[1] {
                Some(scaled(&gb.bmm(&s[0].transpose(1, 2)?)?, alpha)?)
            } else {
                None
            };
            let d2 = if needs[2] {
                Some(scaled(
                    &s[a_req as usize].transpose(1, 2)?.bmm(&gb)?,
                    alpha,
                )?)
            } else {
                None
            };
            Ok(vec![dc, d1, d2])
        });
        record(
            "AddbmmBackward",
            out,
            &[Some(self), Some(batch1), Some(batch2)],
            saved,
            f,
            false,
        )
    }

    /// [`Tensor::addmv`] with gradients: `beta * g` summed to `self`'s
    /// shape, `alpha * outer(g, vec)`, `alpha * matᵀ @ g`.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{DType, Device, Tensor};
    /// let c = Var::new(Tensor::ones(&[2], DType::F32, Device::Cpu).unwrap());
    /// let m = Var::new(Tensor::ones(&[2, 3], DType::F32, Device::Cpu).unwrap());
    /// let v = Var::parameter(Tensor::ones(&[3], DType::F32, Device::Cpu).unwrap()).unwrap();
    /// c.addmv(&m, &v, 1, 1).unwrap().sum(None, false).unwrap().backward().unwrap();
    /// assert_eq!(v.grad().unwrap().to_vec::<f32>().unwrap(), vec![2.0; 3]);
    /// ```
    pub fn addmv(
        &self,
        mat: &Var,
        vec: &Var,
        beta: impl Into<Scalar>,
        alpha: impl Into<Scalar>,
    ) -> Result<Var> {
        let (beta, alpha) = (beta.into(), alpha.into());
        let out = self.data().addmv(mat.data(), vec.data(), beta, alpha)?;
        let a_req = mat.requires_grad();
        let saved = save_partners(mat, vec);
        let (c_shape, c_dtype) = (self.shape().to_vec(), self.dtype());
        let f = formula(move |g, s, needs| {
            let dc = if needs[0] {
                Some(sum_to(&scaled(g, beta)?, &c_shape, c_dtype)?)
            } else {
                None
            };
            let dm = if needs[1] {
                Some(scaled(&g.outer(&s[0])?, alpha)?)
            } else {
                None
            };
            let dv = if needs[2] {
                let m = &s[a_req as usize];
                Some(scaled(&m.t()?.matmul(g)?, alpha)?)
            } else {
                None
            };
            Ok(vec![dc, dm, dv])
        });
        record(
            "AddmvBackward",
            out,
            &[Some(self), Some(mat), Some(vec)],
            saved,
            f,
            false,
        )
    }

    /// [`Tensor::addr`] with gradients: `beta * g` summed to `self`'s
    /// shape, `alpha * g @ vec2`, `alpha * gᵀ @ vec1` (each in its input's
    /// dtype).
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{DType, Device, Tensor};
    /// let c = Var::new(Tensor::ones(&[2, 3], DType::F32, Device::Cpu).unwrap());
    /// let a = Var::parameter(Tensor::ones(&[2], DType::F32, Device::Cpu).unwrap()).unwrap();
    /// let b = Var::new(Tensor::ones(&[3], DType::F32, Device::Cpu).unwrap());
    /// c.addr(&a, &b, 1, 1).unwrap().sum(None, false).unwrap().backward().unwrap();
    /// assert_eq!(a.grad().unwrap().to_vec::<f32>().unwrap(), vec![3.0; 2]);
    /// ```
    pub fn addr(
        &self,
        vec1: &Var,
        vec2: &Var,
        beta: impl Into<Scalar>,
        alpha: impl Into<Scalar>,
    ) -> Result<Var> {
        let (beta, alpha) = (beta.into(), alpha.into());
        let out = self.data().addr(vec1.data(), vec2.data(), beta, alpha)?;
        let a_req = vec1.requires_grad();
        let saved = save_partners(vec1, vec2);
        let (c_shape, c_dtype) = (self.shape().to_vec(), self.dtype());
        let (d1t, d2t) = (vec1.dtype(), vec2.dtype());
        let f = formula(move |g, s, needs| {
            let dc = if needs[0] {
                Some(sum_to(&scaled(g, beta)?, &c_shape, c_dtype)?)
            } else {
                None
            };
            let dtype = g.dtype();
            let d1 = if needs[1] {
                let v2 = s[0].to_dtype(dtype)?;
                Some(sum_to(
                    &scaled(&g.matmul(&v2)?, alpha)?,
                    &[g.shape()[0]],
                    d1t,
                )?)
            } else {
                None
            };
            let d2 = if needs[2] {
                let v1 = s[a_req as usize].to_dtype(dtype)?;
                Some(sum_to(
                    &scaled(&g.t()?.matmul(&v1)?, alpha)?,
                    &[g.shape()[1]],
                    d2t,
                )?)
            } else {
                None
            };
            Ok(vec![dc, d1, d2])
        });
        record(
            "AddrBackward",
            out,
            &[Some(self), Some(vec1), Some(vec2)],
            saved,
            f,
            false,
        )
    }

    /// [`Tensor::lerp`] with gradients: `g * (1 - weight)` for `self`,
    /// `g * weight` for `end`, `g * (end - self)` for a weight variable,
    /// each summed to its input's shape.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{DType, Device, Tensor};
    /// let a = Var::parameter(Tensor::zeros(&[2], DType::F32, Device::Cpu).unwrap()).unwrap();
    /// let b = Var::parameter(Tensor::ones(&[2], DType::F32, Device::Cpu).unwrap()).unwrap();
    /// a.lerp(&b, 0.25).unwrap().sum(None, false).unwrap().backward().unwrap();
    /// assert_eq!(a.grad().unwrap().to_vec::<f32>().unwrap(), vec![0.75; 2]);
    /// assert_eq!(b.grad().unwrap().to_vec::<f32>().unwrap(), vec![0.25; 2]);
    /// ```
    pub fn lerp<'a>(&self, end: &Var, weight: impl Into<VarOperand<'a>>) -> Result<Var> {
        let weight = weight.into();
        let out = match weight {
            VarOperand::Scalar(w) => self.data().lerp(end.data(), w)?,
            VarOperand::Var(w) => self.data().lerp(end.data(), w.data())?,
        };
        let (s_shape, e_shape, dtype) = (self.shape().to_vec(), end.shape().to_vec(), self.dtype());
        match weight {
            VarOperand::Scalar(w) => {
                let w = w.to_f64();
                let f = formula(move |g, _s, needs| {
                    let ds = if needs[0] {
                        Some(sum_to(&g.mul(1.0 - w)?, &s_shape, dtype)?)
                    } else {
                        None
                    };
                    let de = if needs[1] {
                        Some(sum_to(&g.mul(w)?, &e_shape, dtype)?)
                    } else {
                        None
                    };
                    Ok(vec![ds, de])
                });
                record(
                    "LerpBackward",
                    out,
                    &[Some(self), Some(end)],
                    Vec::new,
                    f,
                    false,
                )
            }
            VarOperand::Var(w) => {
                let w_req = w.requires_grad();
                let saved = || {
                    let mut v = vec![w.data().clone()];
                    if w_req {
                        v.push(self.data().clone());
                        v.push(end.data().clone());
                    }
                    v
                };
                let (w_shape, w_dtype) = (w.shape().to_vec(), w.dtype());
                let f = formula(move |g, s, needs| {
                    let wt = s[0].to_dtype(g.dtype())?;
                    let ds = if needs[0] {
                        Some(sum_to(&g.mul(&wt.neg()?.add(1)?)?, &s_shape, dtype)?)
                    } else {
                        None
                    };
                    let de = if needs[1] {
                        Some(sum_to(&g.mul(&wt)?, &e_shape, dtype)?)
                    } else {
                        None
                    };
                    let dw = if needs[2] {
                        let diff = s[2].sub(&s[1])?;
                        Some(sum_to(&g.mul(&diff)?, &w_shape, w_dtype)?)
                    } else {
                        None
                    };
                    Ok(vec![ds, de, dw])
                });
                record(
                    "LerpBackward",
                    out,
                    &[Some(self), Some(end), Some(w)],
                    saved,
                    f,
                    false,
                )
            }
        }
    }

    /// [`Tensor::cross`] (`torch.linalg.cross`) with gradients:
    /// `cross(other, g)` for `self`, `cross(g, self)` for `other`, summed to
    /// their shapes where they were broadcast.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{Device, Tensor};
    /// let x = Var::parameter(Tensor::from_slice(&[1.0f32, 0., 0.], &[3], Device::Cpu).unwrap()).unwrap();
    /// let y = Var::new(Tensor::from_slice(&[0.0f32, 1., 0.], &[3], Device::Cpu).unwrap());
    /// x.cross(&y, -1).unwrap().sum(None, false).unwrap().backward().unwrap();
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), vec![1.0, 0.0, -1.0]);
    /// ```
    pub fn cross(&self, other: &Var, dim: i64) -> Result<Var> {
        let out = self.data().cross(other.data(), dim)?;
        let a_req = self.requires_grad();
        let saved = save_partners(self, other);
        let (sa, sb, dtype) = (self.shape().to_vec(), other.shape().to_vec(), self.dtype());
        let f = formula(move |g, s, needs| {
            let da = if needs[0] {
                let b = s[0].broadcast_to(g.shape())?;
                Some(sum_to(&b.cross(g, dim)?, &sa, dtype)?)
            } else {
                None
            };
            let db = if needs[1] {
                let a = s[a_req as usize].broadcast_to(g.shape())?;
                Some(sum_to(&g.cross(&a, dim)?, &sb, dtype)?)
            } else {
                None
            };
            Ok(vec![da, db])
        });
        record(
            "LinalgCrossBackward",
            out,
            &[Some(self), Some(other)],
            saved,
            f,
            false,
        )
    }
}
