//! `Display` in PyTorch's style (`tensor([[1., 2.], ...])`, summarised with
//! `...` beyond 1000 elements, rows wrapped at 80 columns, dtype suffix for
//! non-default dtypes), with PyTorch's choice of notation and width.

use crate::dtype::DType;
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use std::fmt;
use strata_alloc::Device;

const THRESHOLD: usize = 1000;
const EDGE: usize = 3;

/// Python's `"{:.4e}".format(x)` for a finite `x`: the exponent has a sign
/// and at least two digits (`1.0000e+09`, `1.0000e-05`), where Rust writes
/// `1.0000e9`.
fn sci(x: f64) -> String {
    let s = format!("{x:.4e}");
    match s.split_once('e') {
        Some((mantissa, exp)) => {
            let (sign, digits) = match exp.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', exp),
            };
            format!("{mantissa}e{sign}{digits:0>2}")
        }
        None => s,
    }
}

/// Python's spelling of a non-finite float (`nan`, `inf`, `-inf`).
fn non_finite(x: f64) -> String {
    if x.is_nan() {
        "nan".into()
    } else if x > 0.0 {
        "inf".into()
    } else {
        "-inf".into()
    }
}

/// Formats the elements as PyTorch's `_Formatter` (`torch/_tensor_str.py`)
/// does, returning the strings and the width they are right-aligned to.
///
/// Integer and bool elements take the width of the longest. For floats,
/// only the nonzero finite elements decide the notation and the width
/// (zeros, NaN and infinities are padded to it, or stay longer): integral
/// values print as `1.`, unless the largest is above 1e8 or more than 1000
/// times the smallest (then `1.0000e+00` for all); others print with four
/// decimals, or in that scientific notation when the largest is above 1e8,
/// the smallest below 1e-4, or their ratio above 1000.
fn format_elements(values: &[Scalar], dtype: DType) -> (Vec<String>, usize) {
    if !dtype.is_float() {
        let strs: Vec<String> = values
            .iter()
            .map(|v| match v {
                Scalar::Bool(b) => if *b { "True" } else { "False" }.to_string(),
                other => other.to_string(),
            })
            .collect();
        let width = strs.iter().map(String::len).max().unwrap_or(0).max(1);
        return (strs, width);
    }
    let fl: Vec<f64> = values.iter().map(|v| v.to_f64()).collect();
    let nonzero: Vec<f64> = fl
        .iter()
        .copied()
        .filter(|x| x.is_finite() && *x != 0.0)
        .collect();
    let int_mode = nonzero.iter().all(|x| x.fract() == 0.0);
    let (mn, mx) = nonzero.iter().fold((f64::INFINITY, 0.0f64), |(a, b), &x| {
        (a.min(x.abs()), b.max(x.abs()))
    });
    let sci_mode =
        !nonzero.is_empty() && (mx / mn > 1000.0 || mx > 1e8 || (!int_mode && mn < 1e-4));
    let format = |x: f64| {
        if !x.is_finite() {
            non_finite(x)
        } else if sci_mode {
            sci(x)
        } else if int_mode {
            format!("{x:.0}.")
        } else {
            format!("{x:.4}")
        }
    };
    let width = nonzero
        .iter()
        .map(|&x| format(x).len())
        .max()
        .unwrap_or(0)
        .max(1);
    (fl.into_iter().map(format).collect(), width)
}

/// Elements per line of a printed row: PyTorch's `_vector_str` fits rows
/// into 80 columns (`linewidth`), counting `", "` after each element and
/// the row's indent.
fn elements_per_line(width: usize, indent: usize) -> usize {
    (80usize.saturating_sub(indent) / (width + 2)).max(1)
}

/// The entries of a printed dim of `size` (`None` marks the `...` gap,
/// which sits after the first `EDGE` when the tensor's dim is longer).
fn shown(size: usize, gap: bool) -> Vec<Option<usize>> {
    if gap {
        (0..EDGE)
            .map(Some)
            .chain([None])
            .chain((EDGE..size).map(Some))
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
    /// The printed shape (edges only).
    shape: &'a [usize],
    /// The tensor's shape: where it is larger, a `...` gap is printed.
    full_shape: &'a [usize],
}

impl Printer<'_> {
    fn write_dim(&self, out: &mut String, base: usize, dim: usize, indent: usize) {
        let shape = self.shape;
        // A run of dims of size 1 (before the last dim) prints only their
        // brackets, written here in one go rather than one call per dim: a
        // tensor with elements has at most 63 dims larger than 1, but may
        // have thousands of size 1, and a call per dim overflowed the
        // stack (PyTorch, whose printer also recurses per dim, raises
        // RecursionError there).
        let run = shape[dim..shape.len() - 1]
            .iter()
            .zip(&self.full_shape[dim..])
            .take_while(|&(&s, &f)| s == 1 && f == 1)
            .count();
        if run > 0 {
            out.push_str(&"[".repeat(run));
            self.write_dim(out, base, dim + run, indent + run);
            out.push_str(&"]".repeat(run));
            return;
        }
        let stride: usize = shape[dim + 1..].iter().product();
        out.push('[');
        let gap = self.full_shape[dim] > shape[dim];
        let per_line = elements_per_line(self.width, indent);
        for (n, it) in shown(shape[dim], gap).iter().enumerate() {
            if n > 0 {
                if dim + 1 == shape.len() {
                    // A row longer than a line continues on the next one,
                    // under its first element (the ` ...` gap counts as an
                    // element, as in PyTorch).
                    if n % per_line == 0 {
                        out.push_str(",\n");
                        out.push_str(&" ".repeat(indent + 1));
                    } else {
                        out.push_str(", ");
                    }
                } else {
                    out.push(',');
                    out.push_str(&"\n".repeat(shape.len() - dim - 1));
                    out.push_str(&" ".repeat(indent + 1));
                }
            }
            match it {
                // PyTorch writes ` ...` inside a row, `...` between rows.
                None if dim + 1 == shape.len() => out.push_str(" ..."),
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

#[cfg(test)]
thread_local! {
    /// Elements `Display` copied to the host on this thread (for tests).
    static COPIED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Copies a (small) view's elements to the host, counting them in tests.
fn read(t: &Tensor) -> crate::Result<Vec<Scalar>> {
    #[cfg(test)]
    COPIED.with(|c| c.set(c.get() + t.numel()));
    t.to_scalars()
}

/// The printed part of `t`: with summarisation, each dim longer than
/// `2 * EDGE` keeps only its first and last `EDGE` indices. Returns that
/// (small) shape and its elements, copied to the host one edge block at a
/// time through `narrow` views, so a summarised print copies at most
/// `(2 * EDGE)^ndim` elements however large the tensor is.
fn gather(t: &Tensor, summarise: bool) -> crate::Result<(Vec<usize>, Vec<Scalar>)> {
    let shown_shape: Vec<usize> = t
        .shape()
        .iter()
        .map(|&n| {
            if summarise && n > 2 * EDGE {
                2 * EDGE
            } else {
                n
            }
        })
        .collect();
    if shown_shape == t.shape() {
        return Ok((shown_shape, read(t)?));
    }
    // Split each long dim into its two edge blocks, recursively, and place
    // each copied block at its row-major position in the printed shape.
    let mut out = vec![Scalar::Int(0); shown_shape.iter().product()];
    fill(t, 0, &shown_shape, 0, &mut out)?;
    Ok((shown_shape, out))
}

/// Writes the printed elements of `t` (already narrowed on dims `< dim`)
/// into `out` at the row-major positions of `shown`, starting at `base`.
fn fill(
    t: &Tensor,
    mut dim: usize,
    shown: &[usize],
    base: usize,
    out: &mut [Scalar],
) -> crate::Result<()> {
    // Dims of size 1 hold one row each, printed whole: skipped without a
    // call per dim (see `Printer::write_dim`).
    while dim < t.ndim() && t.shape()[dim] == 1 {
        dim += 1;
    }
    if dim == t.ndim() || t.shape()[dim..] == shown[dim..] {
        // The rest is printed whole: one copy of this block.
        let vals = read(t)?;
        let inner: usize = shown[dim..].iter().product();
        out[base..base + inner].clone_from_slice(&vals);
        return Ok(());
    }
    let inner: usize = shown[dim + 1..].iter().product();
    let n = t.shape()[dim];
    if n == shown[dim] {
        for i in 0..n {
            let row = t.narrow(dim as i64, i as i64, 1)?;
            fill(&row, dim + 1, shown, base + i * inner, out)?;
        }
        return Ok(());
    }
    let head = t.narrow(dim as i64, 0, EDGE as i64)?;
    let tail = t.narrow(dim as i64, (n - EDGE) as i64, EDGE as i64)?;
    fill_block(&head, dim, shown, base, out)?;
    fill_block(&tail, dim, shown, base + EDGE * inner, out)
}

/// One edge block (`EDGE` indices of `dim`): each index in turn.
fn fill_block(
    t: &Tensor,
    dim: usize,
    shown: &[usize],
    base: usize,
    out: &mut [Scalar],
) -> crate::Result<()> {
    let inner: usize = shown[dim + 1..].iter().product();
    if t.shape()[dim + 1..] == shown[dim + 1..] {
        // Everything below is printed whole: copy the block at once.
        let vals = read(t)?;
        out[base..base + vals.len()].clone_from_slice(&vals);
        return Ok(());
    }
    for i in 0..EDGE {
        let row = t.narrow(dim as i64, i as i64, 1)?;
        fill(&row, dim + 1, shown, base + i * inner, out)?;
    }
    Ok(())
}

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let summarise = self.numel() > THRESHOLD;
        let (shown_shape, values) = match gather(self, summarise) {
            Ok(v) => v,
            Err(e) => return write!(f, "tensor(<unreadable: {e}>)"),
        };
        let mut body = String::new();
        if self.ndim() == 0 {
            let (strs, width) = format_elements(&values, self.dtype());
            body = format!("{:>width$}", strs[0]);
        } else if self.numel() == 0 {
            body.push_str("[]");
        } else {
            // Only the printed elements decide the notation and width.
            let (strs, width) = format_elements(&values, self.dtype());
            let p = Printer {
                strs: &strs,
                width,
                shape: &shown_shape,
                full_shape: self.shape(),
            };
            p.write_dim(&mut body, 0, 0, 7);
        }
        // PyTorch's order of suffixes: device, size, dtype.
        let mut suffixes = Vec::new();
        if self.device() != Device::Cpu {
            suffixes.push(format!("device='{}'", self.device()));
        }
        if self.numel() == 0 && self.shape() != [0] {
            let dims: Vec<String> = self.shape().iter().map(|d| d.to_string()).collect();
            suffixes.push(format!(
                "size=({}{})",
                dims.join(", "),
                if dims.len() == 1 { "," } else { "" }
            ));
        }
        // An empty tensor has no elements to show that it holds integers or
        // bools, so, as in PyTorch, every dtype but the default float one
        // is named (`tensor([], dtype=torch.int64)`).
        let default_dtype = if self.numel() == 0 {
            matches!(self.dtype(), DType::F32)
        } else {
            matches!(self.dtype(), DType::F32 | DType::I64 | DType::Bool)
        };
        if !default_dtype {
            suffixes.push(format!("dtype={}", self.dtype().torch_name()));
        }
        f.write_str(&with_suffixes(format!("tensor({body}"), &suffixes))
    }
}

/// PyTorch's `_add_suffixes`: each suffix goes on the last line after `, `
/// unless the line would pass 80 columns, when it starts a new line indented
/// under `tensor(` (`...  255.0000],\n       dtype=torch.float16)`). The
/// line lengths are PyTorch's own reckoning: the last line's length plus 2
/// (its `rfind("\n")` arithmetic), then plus each suffix and its `, `.
fn with_suffixes(mut s: String, suffixes: &[String]) -> String {
    const LINE_WIDTH: usize = 80;
    const INDENT: usize = "tensor(".len();
    let mut last_line = match s.rfind('\n') {
        Some(i) => s.len() - i + 1,
        None => s.len() + 2,
    };
    for suffix in suffixes {
        if last_line + suffix.len() + 2 > LINE_WIDTH {
            s.push_str(",\n");
            s.push_str(&" ".repeat(INDENT));
            last_line = INDENT + suffix.len();
        } else {
            s.push_str(", ");
            last_line += suffix.len() + 2;
        }
        s.push_str(suffix);
    }
    s.push(')');
    s
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

    fn copied() -> usize {
        super::COPIED.with(|c| c.get())
    }

    #[test]
    fn summary_of_ten_million_elements_copies_only_the_edges() {
        let big = Tensor::arange(0, 10_000_000, 1, None, Device::Cpu).unwrap();
        let m = big.view(&[2000, 5000]).unwrap();
        let before = copied();
        let s = m.to_string();
        // 6 x 6 printed elements, not 10^7.
        assert_eq!(copied() - before, 36, "{s}");
        assert_eq!(
            s,
            "tensor([[      0,       1,       2,  ...,    4997,    4998,    4999],\n\
             \x20       [   5000,    5001,    5002,  ...,    9997,    9998,    9999],\n\
             \x20       [  10000,   10001,   10002,  ...,   14997,   14998,   14999],\n\
             \x20       ...,\n\
             \x20       [9985000, 9985001, 9985002,  ..., 9989997, 9989998, 9989999],\n\
             \x20       [9990000, 9990001, 9990002,  ..., 9994997, 9994998, 9994999],\n\
             \x20       [9995000, 9995001, 9995002,  ..., 9999997, 9999998, 9999999]])"
        );
        let before = copied();
        let s1 = big.to_string();
        assert_eq!(copied() - before, 6);
        assert_eq!(
            s1,
            "tensor([      0,       1,       2,  ..., 9999997, 9999998, 9999999])"
        );
        // A transposed (non-contiguous) 3-d view: still only the edges.
        let t3 = big
            .view(&[100, 100, 1000])
            .unwrap()
            .permute(&[2, 0, 1])
            .unwrap();
        let before = copied();
        let s3 = t3.to_string();
        assert_eq!(copied() - before, 216, "{s3}");
        assert!(
            s3.starts_with(
                "tensor([[[      0,    1000,    2000,  ...,   97000,   98000,   99000],"
            ),
            "{s3}"
        );
    }

    #[test]
    fn small_dims_are_printed_whole_under_summarisation() {
        // [2, 1000]: dim 0 is short (printed whole), dim 1 summarised.
        let t = Tensor::arange(0, 2000, 1, None, Device::Cpu)
            .unwrap()
            .view(&[2, 1000])
            .unwrap();
        let before = copied();
        let s = t.to_string();
        assert_eq!(copied() - before, 12);
        assert_eq!(
            s,
            "tensor([[   0,    1,    2,  ...,  997,  998,  999],\n\
             \x20       [1000, 1001, 1002,  ..., 1997, 1998, 1999]])"
        );
    }
}
