//! `Display` in PyTorch's style (`tensor([[1., 2.], ...])`, summarised with
//! `...` beyond 1000 elements, dtype suffix for non-default dtypes).

use crate::dtype::DType;
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use std::fmt;
use strata_alloc::Device;

const THRESHOLD: usize = 1000;
const EDGE: usize = 3;

/// Formats the elements: all elements share one width and one notation.
fn format_elements(values: &[Scalar], dtype: DType) -> Vec<String> {
    if !dtype.is_float() {
        return values
            .iter()
            .map(|v| match v {
                Scalar::Bool(b) => if *b { "True" } else { "False" }.to_string(),
                other => other.to_string(),
            })
            .collect();
    }
    let fl: Vec<f64> = values.iter().map(|v| v.to_f64()).collect();
    let finite: Vec<f64> = fl.iter().copied().filter(|x| x.is_finite()).collect();
    let int_mode = finite.iter().all(|x| x.fract() == 0.0);
    let nonzero: Vec<f64> = finite
        .iter()
        .map(|x| x.abs())
        .filter(|&x| x > 0.0)
        .collect();
    let (mn, mx) = nonzero
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(a, b), &x| (a.min(x), b.max(x)));
    let sci = !nonzero.is_empty() && (mx > 1e8 || (!int_mode && (mx / mn > 1000.0 || mn < 1e-4)));
    fl.iter()
        .map(|&x| {
            if x.is_nan() {
                "nan".into()
            } else if x.is_infinite() {
                if x > 0.0 { "inf" } else { "-inf" }.into()
            } else if sci {
                format!("{x:.4e}")
            } else if int_mode {
                format!("{x:.0}.")
            } else {
                format!("{x:.4}")
            }
        })
        .collect()
}

/// Which indices of a dim of `size` are printed (`None` marks the `...` gap).
fn shown(size: usize, summarise: bool) -> Vec<Option<usize>> {
    if summarise && size > 2 * EDGE {
        (0..EDGE)
            .map(Some)
            .chain([None])
            .chain((size - EDGE..size).map(Some))
            .collect()
    } else {
        (0..size).map(Some).collect()
    }
}

/// The pieces of one print-out: element strings (row-major), their common
/// width, the shape, and whether dims are summarised.
struct Printer<'a> {
    strs: &'a [String],
    width: usize,
    shape: &'a [usize],
    summarise: bool,
}

impl Printer<'_> {
    fn write_dim(&self, out: &mut String, base: usize, dim: usize, indent: usize) {
        let shape = self.shape;
        let stride: usize = shape[dim + 1..].iter().product();
        out.push('[');
        for (n, it) in shown(shape[dim], self.summarise).iter().enumerate() {
            if n > 0 {
                if dim + 1 == shape.len() {
                    out.push_str(", ");
                } else {
                    out.push(',');
                    out.push_str(&"\n".repeat(shape.len() - dim - 1));
                    out.push_str(&" ".repeat(indent + 1));
                }
            }
            match it {
                None => out.push_str("..."),
                Some(i) if dim + 1 == shape.len() => {
                    out.push_str(&format!("{:>w$}", self.strs[base + i], w = self.width))
                }
                Some(i) => self.write_dim(out, base + i * stride, dim + 1, indent + 1),
            }
        }
        out.push(']');
    }
}

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let values = match self.to_scalars() {
            Ok(v) => v,
            Err(e) => return write!(f, "tensor(<unreadable: {e}>)"),
        };
        let summarise = self.numel() > THRESHOLD;
        let mut body = String::new();
        if self.ndim() == 0 {
            body = format_elements(&values, self.dtype()).remove(0);
        } else if self.numel() == 0 {
            body.push_str("[]");
        } else {
            // Only the printed elements decide the notation and width.
            let strs = format_elements(&values, self.dtype());
            let width = strs.iter().map(|s| s.len()).max().unwrap_or(0);
            let p = Printer {
                strs: &strs,
                width,
                shape: self.shape(),
                summarise,
            };
            p.write_dim(&mut body, 0, 0, 7);
        }
        write!(f, "tensor({body}")?;
        if self.numel() == 0 && self.shape() != [0] {
            let dims: Vec<String> = self.shape().iter().map(|d| d.to_string()).collect();
            write!(
                f,
                ", size=({}{})",
                dims.join(", "),
                if dims.len() == 1 { "," } else { "" }
            )?;
        }
        if self.device() != Device::Cpu {
            write!(f, ", device='{}'", self.device())?;
        }
        if !matches!(self.dtype(), DType::F32 | DType::I64 | DType::Bool) {
            write!(f, ", dtype={}", self.dtype().torch_name())?;
        }
        write!(f, ")")
    }
}

#[cfg(test)]
mod tests {
    use crate::{DType, Device, Tensor};

    #[test]
    fn prints_like_pytorch() {
        let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], Device::Cpu).unwrap();
        assert_eq!(a.to_string(), "tensor([[1., 2.],\n        [3., 4.]])");
        let b = Tensor::from_slice(&[1i32, -20], &[2], Device::Cpu).unwrap();
        assert_eq!(b.to_string(), "tensor([  1, -20], dtype=torch.int32)");
        let c = Tensor::from_slice(&[0.5f64], &[], Device::Cpu).unwrap();
        assert_eq!(c.to_string(), "tensor(0.5000, dtype=torch.float64)");
        let big = Tensor::zeros(&[100, 100], DType::I64, Device::Cpu).unwrap();
        let s = big.to_string();
        assert!(s.contains("..."), "{s}");
        assert!(s.lines().count() < 10, "{s}");
    }
}
