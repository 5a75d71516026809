//! Matrix products (`mm`, `bmm`, `matmul` with batch broadcasting).

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::shape::broadcast_shapes;
use crate::storage::AccessGuard;
use crate::tensor::Tensor;

impl Tensor {
    fn check_matmul_dtypes(&self, op: &'static str, b: &Tensor) -> Result<()> {
        if self.device() != b.device() {
            return Err(TensorError::DeviceMismatch {
                op,
                lhs: self.device(),
                rhs: b.device(),
            });
        }
        if self.dtype() != b.dtype() {
            return Err(TensorError::dtype(
                op,
                format!(
                    "operands must share a dtype, got {} and {}",
                    self.dtype(),
                    b.dtype()
                ),
            ));
        }
        if self.dtype() == DType::Bool {
            return Err(TensorError::unsupported(op, DType::Bool));
        }
        Ok(())
    }

    /// Batched product of 3-D operands `[B, m, k] @ [B, k, n]` (checked by callers).
    fn bmm_raw(&self, b: &Tensor) -> Result<Tensor> {
        let (bs, m, n) = (self.shape()[0], self.shape()[1], b.shape()[2]);
        let dtype = self.dtype();
        // f16/bf16 accumulate in f32 and round once, like PyTorch.
        let (a, b) = match dtype {
            DType::F16 | DType::BF16 => (self.to_dtype(DType::F32)?, b.to_dtype(DType::F32)?),
            _ => (self.clone(), b.clone()),
        };
        let out = Tensor::empty(&[bs, m, n], a.dtype(), a.device())?;
        {
            let be = out.backend()?;
            let _g = AccessGuard::lock(Some(out.storage()), &[a.storage(), b.storage()]);
            be.matmul(&out.arg(), &a.arg(), &b.arg())?;
        }
        out.to_dtype(dtype)
    }

    /// Matrix product of two 2-D tensors.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], Device::Cpu).unwrap();
    /// let c = a.mm(&a.t().unwrap()).unwrap();
    /// assert_eq!(c.to_vec::<f32>().unwrap(), vec![5.0, 11.0, 11.0, 25.0]);
    /// ```
    pub fn mm(&self, b: &Tensor) -> Result<Tensor> {
        self.check_matmul_dtypes("mm", b)?;
        if self.ndim() != 2 || b.ndim() != 2 || self.shape()[1] != b.shape()[0] {
            return Err(TensorError::shape(
                "mm",
                format!(
                    "cannot multiply shapes {:?} and {:?}",
                    self.shape(),
                    b.shape()
                ),
            ));
        }
        let r = self.unsqueeze(0)?.bmm_raw(&b.unsqueeze(0)?)?;
        r.squeeze_dims(&[0])
    }

    /// Batched matrix product of two 3-D tensors with equal batch sizes.
    pub fn bmm(&self, b: &Tensor) -> Result<Tensor> {
        self.check_matmul_dtypes("bmm", b)?;
        if self.ndim() != 3
            || b.ndim() != 3
            || self.shape()[0] != b.shape()[0]
            || self.shape()[2] != b.shape()[1]
        {
            return Err(TensorError::shape(
                "bmm",
                format!(
                    "cannot batch-multiply shapes {:?} and {:?}",
                    self.shape(),
                    b.shape()
                ),
            ));
        }
        self.bmm_raw(b)
    }

    /// `torch.matmul`: dot product, matrix-vector, matrix, or batched with
    /// broadcast batch dims (1-D operands get a dim added, then removed).
    pub fn matmul(&self, b: &Tensor) -> Result<Tensor> {
        self.check_matmul_dtypes("matmul", b)?;
        let (na, nb) = (self.ndim(), b.ndim());
        let err = || {
            TensorError::shape(
                "matmul",
                format!(
                    "cannot multiply shapes {:?} and {:?}",
                    self.shape(),
                    b.shape()
                ),
            )
        };
        if na == 0 || nb == 0 {
            return Err(err());
        }
        let a2 = if na == 1 {
            self.unsqueeze(0)?
        } else {
            self.clone()
        };
        let b2 = if nb == 1 { b.unsqueeze(1)? } else { b.clone() };
        let (m, k) = (a2.shape()[a2.ndim() - 2], a2.shape()[a2.ndim() - 1]);
        let (k2, n) = (b2.shape()[b2.ndim() - 2], b2.shape()[b2.ndim() - 1]);
        if k != k2 {
            return Err(err());
        }
        let batch = broadcast_shapes(
            "matmul",
            &a2.shape()[..a2.ndim() - 2],
            &b2.shape()[..b2.ndim() - 2],
        )?;
        let bsz: usize = batch.iter().product();
        let expand_to = |t: &Tensor, r: usize, c: usize| -> Result<Tensor> {
            let mut s: Vec<i64> = batch.iter().map(|&x| x as i64).collect();
            s.extend([r as i64, c as i64]);
            t.expand(&s)?.reshape(&[bsz as i64, r as i64, c as i64])
        };
        let out = expand_to(&a2, m, k)?.bmm_raw(&expand_to(&b2, k, n)?)?;
        let mut shape: Vec<i64> = batch.iter().map(|&x| x as i64).collect();
        if na > 1 {
            shape.push(m as i64);
        }
        if nb > 1 {
            shape.push(n as i64);
        }
        out.view(&shape)
    }
}
