//! Joining and splitting (issue 12): `cat`/`stack` hand each input its
//! slice of the gradient (a narrow of it, converted back to the input's
//! dtype); `split`/`chunk` return recorded `narrow` views, so their pieces'
//! gradients accumulate into the operand's.

use super::formula;
use crate::error::Result;
use crate::var::{record, Var};
use strata_tensor::{SplitSize, Tensor};

/// Where one input of `cat` sits in the output along the dim (None: a
/// skipped empty 1-D input), its dtype and its shape.
type CatPart = (Option<(i64, i64)>, strata_tensor::DType, Vec<usize>);

impl Var {
    /// `torch.cat(tensors, dim)` with gradients for every input.
    pub fn cat(tensors: &[&Var], dim: i64) -> Result<Var> {
        let data: Vec<&Tensor> = tensors.iter().map(|v| v.data()).collect();
        let out = Tensor::cat(&data, dim)?;
        // Where each input sits along the dim (skipped empty 1-D inputs: nowhere).
        // The output's dim. `Tensor::cat` ignores an out-of-range dim only
        // when every input is an empty 1-D tensor (as PyTorch does); the
        // output is then 1-D and empty, and its one dim holds them all.
        let nd = out.ndim() as i64;
        let d = match if dim < 0 { dim + nd } else { dim } {
            d if (0..nd).contains(&d) => d,
            _ => 0,
        };
        let metas: Vec<CatPart> = {
            let mut at = 0i64;
            tensors
                .iter()
                .map(|v| {
                    let skip = v.ndim() == 1 && v.numel() == 0 && out.ndim() != 1;
                    let span = if skip || v.ndim() == 0 {
                        None
                    } else {
                        let len = v.shape()[d as usize] as i64;
                        at += len;
                        Some((at - len, len))
                    };
                    (span, v.dtype(), v.shape().to_vec())
                })
                .collect()
        };
        let inputs: Vec<Option<&Var>> = tensors.iter().map(|v| Some(*v)).collect();
        let f = formula(move |g, _s, needs| {
            metas
                .iter()
                .zip(needs)
                .map(|((span, dtype, shape), &need)| {
                    if !need {
                        return Ok(None);
                    }
                    // An input with no elements gets an empty gradient without
                    // a view of `g`: an empty output's strides may be huge
                    // (`[3, 0, 2^62]`), and the view of a later input's slice
                    // would start beyond i64::MAX (as `Tensor::cat` skips
                    // copying such inputs).
                    let empty = shape.contains(&0);
                    Ok(Some(match span {
                        Some((start, len)) if !empty => g
                            .narrow(d, *start, *len)?
                            .to_dtype_contiguous(*dtype)?
                            .contiguous()?,
                        _ => Tensor::zeros(shape, *dtype, g.device())?,
                    }))
                })
                .collect()
        });
        record("CatBackward", out, &inputs, Vec::new, f, false)
    }

    /// `torch.stack(tensors, dim)`: unsqueeze and cat (recorded).
    pub fn stack(tensors: &[&Var], dim: i64) -> Result<Var> {
        // Validate with the tensor op first (shapes, dim range).
        let data: Vec<&Tensor> = tensors.iter().map(|v| v.data()).collect();
        let probe = Tensor::stack(&data, dim)?;
        let nd = probe.ndim() as i64;
        let d = if dim < 0 { dim + nd } else { dim };
        let parts: Vec<Var> = tensors
            .iter()
            .map(|v| v.unsqueeze(d))
            .collect::<Result<_>>()?;
        let refs: Vec<&Var> = parts.iter().collect();
        Var::cat(&refs, d)
    }

    /// `torch.split(self, size, dim)`: recorded narrow views (not to be
    /// modified in place by a recorded op, as in PyTorch).
    pub fn split(&self, size: impl Into<SplitSize>, dim: i64) -> Result<Vec<Var>> {
        let pieces = self.data().split(size, dim)?;
        let nd = self.ndim() as i64;
        let d = if dim < 0 { dim + nd } else { dim };
        let mut at = 0i64;
        pieces
            .iter()
            .map(|p| {
                let len = p.shape()[d as usize] as i64;
                at += len;
                let v = self.narrow(d, at - len, len)?;
                v.mark_multi_output_view();
                Ok(v)
            })
            .collect()
    }

    /// `torch.chunk(self, chunks, dim)`: recorded narrow views (not to be
    /// modified in place by a recorded op, as in PyTorch).
    pub fn chunk(&self, chunks: i64, dim: i64) -> Result<Vec<Var>> {
        let pieces = self.data().chunk(chunks, dim)?;
        let nd = self.ndim() as i64;
        let d = if dim < 0 { dim + nd } else { dim };
        let mut at = 0i64;
        pieces
            .iter()
            .map(|p| {
                let len = p.shape()[d as usize] as i64;
                at += len;
                let v = self.narrow(d, at - len, len)?;
                v.mark_multi_output_view();
                Ok(v)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_tensor::{DType, Device};

    #[test]
    fn cat_of_empty_1d_inputs_ignores_an_out_of_range_dim_and_backpropagates() {
        let a = Var::parameter(Tensor::zeros(&[0], DType::F32, Device::Cpu).unwrap()).unwrap();
        let b = Var::parameter(Tensor::zeros(&[0], DType::F32, Device::Cpu).unwrap()).unwrap();
        for dim in [3, -2, i64::MAX, i64::MIN] {
            let out = Var::cat(&[&a, &b], dim).unwrap();
            assert_eq!(out.shape(), &[0]);
            out.sum(None, false).unwrap().backward().unwrap();
            assert_eq!(a.grad().unwrap().shape(), &[0]);
        }
    }
}
