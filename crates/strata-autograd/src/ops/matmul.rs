//! Matrix products with PyTorch's `matmul` rules (1-D operands, batch
//! broadcasting); the gradients are products with the other operand,
//! summed over broadcast batch dims.

use super::{formula, save_partners, sum_to};
use crate::error::Result;
use crate::var::{record, Var};
use strata_tensor::Tensor;

/// The operand as matmul sees it: 1-D `a` becomes `[1, k]`, 1-D `b` becomes `[k, 1]`.
fn as_matrix(t: &Tensor, is_lhs: bool) -> Result<Tensor> {
    Ok(match (t.ndim(), is_lhs) {
        (1, true) => t.unsqueeze(0)?,
        (1, false) => t.unsqueeze(1)?,
        _ => t.clone(),
    })
}

impl Var {
    /// PyTorch's `matmul` folds the batch of the operand with more dims into
    /// one `mm` or `mv` whenever the other operand (1 or 2 dims) requires a
    /// gradient (its `should_fold`), and those check the dtypes even for an
    /// empty product; the tensor-level `matmul`, which knows nothing of
    /// gradients, returns such an empty product of mixed dtypes as `bmm`
    /// does. Called after it, so that its shape errors come first.
    fn check_folded_dtypes(&self, other: &Var) -> Result<()> {
        let (na, nb) = (self.ndim(), other.ndim());
        let (larger, small, small_requires_grad) = if na >= nb {
            (na, nb, other.requires_grad())
        } else {
            (nb, na, self.requires_grad())
        };
        let mixed = self.dtype() != other.dtype() || self.dtype() == strata_tensor::DType::Bool;
        if larger >= 3 && (small == 1 || small == 2) && small_requires_grad && mixed {
            return Err(strata_tensor::TensorError::DType {
                op: "matmul",
                msg: format!(
                    "operands must share a dtype, got {} and {}",
                    self.dtype(),
                    other.dtype()
                ),
            }
            .into());
        }
        Ok(())
    }

    /// `torch.matmul`: dot, matrix-vector, matrix and batched products.
    pub fn matmul(&self, other: &Var) -> Result<Var> {
        if let Some(c) = crate::autocast::cast_inputs("matmul", &[self, other])? {
            return c[0].matmul_uncast(&c[1]);
        }
        self.matmul_uncast(other)
    }

    /// `matmul` in the inputs' own dtypes (after autocast, if any, cast them).
    pub(crate) fn matmul_uncast(&self, other: &Var) -> Result<Var> {
        let out = self.data().matmul(other.data())?;
        self.check_folded_dtypes(other)?;
        let a_req = self.requires_grad();
        let saved = save_partners(self, other);
        let (a_shape, b_shape) = (self.shape().to_vec(), other.shape().to_vec());
        let (a_dtype, b_dtype) = (self.dtype(), other.dtype());
        let f = formula(move |g, s, needs| {
            let b = needs[0].then(|| &s[0]);
            // `other` was saved first when self requires grad, whether or
            // not this pass needs self's gradient (a `grad` pass that asks
            // only for other's).
            let a = needs[1].then(|| &s[a_req as usize]);
            // Shapes of the 2-D-or-more operands and of the full product.
            let a2_shape = if a_shape.len() == 1 {
                vec![1, a_shape[0]]
            } else {
                a_shape.clone()
            };
            let b2_shape = if b_shape.len() == 1 {
                vec![b_shape[0], 1]
            } else {
                b_shape.clone()
            };
            let batch = strata_tensor::shape::broadcast_shapes(
                "matmul backward",
                &a2_shape[..a2_shape.len() - 2],
                &b2_shape[..b2_shape.len() - 2],
            )?;
            let mut full: Vec<i64> = batch.iter().map(|&x| x as i64).collect();
            full.push(a2_shape[a2_shape.len() - 2] as i64);
            full.push(b2_shape[b2_shape.len() - 1] as i64);
            let g2 = g.reshape(&full)?;
            let ga = match b {
                Some(b) => {
                    let b2 = as_matrix(b, false)?;
                    let ga2 = g2.matmul(&b2.transpose(-1, -2)?)?;
                    Some(sum_to(&ga2, &a2_shape, a_dtype)?.reshape(&dims_of(&a_shape))?)
                }
                None => None,
            };
            let gb = match a {
                Some(a) => {
                    let a2 = as_matrix(a, true)?;
                    let gb2 = a2.transpose(-1, -2)?.matmul(&g2)?;
                    Some(sum_to(&gb2, &b2_shape, b_dtype)?.reshape(&dims_of(&b_shape))?)
                }
                None => None,
            };
            Ok(vec![ga, gb])
        });
        record(
            "MatmulBackward",
            out,
            &[Some(self), Some(other)],
            saved,
            f,
            false,
        )
    }

    /// `self + mat1 @ mat2` (PyTorch's `torch.addmm` with `beta = alpha =
    /// 1`): `mat1` `[n, m]`, `mat2` `[m, p]`, `self` broadcastable to `[n,
    /// p]`, the sum rounded once ([`Tensor::addmm`]). Under autocast all
    /// three are cast to the region's low precision, as PyTorch's. The
    /// gradients: `g` summed to `self`'s shape, `g mat2ᵀ`, `mat1ᵀ g`.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{DType, Device, Tensor};
    /// let t = |s: &[usize], seed| Var::parameter(Tensor::randn(s, DType::F32, seed, Device::Cpu).unwrap()).unwrap();
    /// let (b, x, w) = (t(&[3], 1), t(&[4, 2], 2), t(&[2, 3], 3));
    /// b.addmm(&x, &w).unwrap().sum(None, false).unwrap().backward().unwrap();
    /// assert_eq!(b.grad().unwrap().to_vec::<f32>().unwrap(), vec![4.0; 3]);
    /// ```
    pub fn addmm(&self, mat1: &Var, mat2: &Var) -> Result<Var> {
        if let Some(c) = crate::autocast::cast_inputs("addmm", &[self, mat1, mat2])? {
            return c[0].addmm_uncast(&c[1], &c[2]);
        }
        self.addmm_uncast(mat1, mat2)
    }

    /// `addmm` in the inputs' own dtypes (after autocast, if any, cast them).
    pub(crate) fn addmm_uncast(&self, mat1: &Var, mat2: &Var) -> Result<Var> {
        let out = self.data().addmm(mat1.data(), mat2.data())?;
        let a_req = mat1.requires_grad();
        let saved = save_partners(mat1, mat2);
        let (c_shape, c_dtype) = (self.shape().to_vec(), self.dtype());
        let f = formula(move |g, s, needs| {
            let dc = if needs[0] {
                Some(sum_to(g, &c_shape, c_dtype)?)
            } else {
                None
            };
            let d1 = if needs[1] {
                Some(g.matmul(&s[0].t()?)?)
            } else {
                None
            };
            let d2 = if needs[2] {
                // mat2 was saved first when mat1 requires grad, whether or
                // not this pass needs mat1's gradient.
                Some(s[a_req as usize].t()?.matmul(g)?)
            } else {
                None
            };
            Ok(vec![dc, d1, d2])
        });
        record(
            "AddmmBackward",
            out,
            &[Some(self), Some(mat1), Some(mat2)],
            saved,
            f,
            false,
        )
    }

    /// Matrix product of two 2-D variables (same as [`Var::matmul`] there).
    pub fn mm(&self, other: &Var) -> Result<Var> {
        if self.ndim() != 2 || other.ndim() != 2 {
            return Err(strata_tensor::TensorError::Shape {
                op: "mm",
                msg: format!(
                    "cannot multiply shapes {:?} and {:?}",
                    self.shape(),
                    other.shape()
                ),
            }
            .into());
        }
        self.matmul(other)
    }
}

fn dims_of(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&x| x as i64).collect()
}
