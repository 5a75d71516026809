//! PyTorch's argument checks for scalar arguments of ops: the computation
//! dtype an op promotes to, and whether each scalar converts to it without
//! overflow (`checked_convert`).

use super::elementwise::{result_type, Operand};
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::scalar::Scalar;
use crate::tensor::Tensor;

/// `value` must convert to `dtype` without overflow, or a
/// [`TensorError::Value`] in PyTorch's words.
pub(crate) fn check_fits(op: &'static str, value: Scalar, dtype: DType) -> Result<()> {
    if value.fits(dtype) {
        return Ok(());
    }
    Err(TensorError::value(
        op,
        format!(
            "value {value} cannot be converted to type {} without overflow",
            dtype.torch_name()
        ),
    ))
}

/// The dtype `clamp(x, min, max)` computes in: `x`'s dtype promoted with the
/// scalar bounds (a float bound on an integer tensor gives f32, an int bound
/// on a bool tensor gives i64). As in PyTorch there is no bool clamp kernel.
/// The bounds themselves are checked by [`clamp_bounds`] (after an in-place
/// clamp has checked that this dtype fits its output, as PyTorch does).
pub(crate) fn clamp_dtype(
    op: &'static str,
    x: &Tensor,
    lo: Option<Scalar>,
    hi: Option<Scalar>,
) -> Result<DType> {
    let mut ops = vec![Operand::Tensor(x)];
    ops.extend(lo.map(Operand::Scalar));
    ops.extend(hi.map(Operand::Scalar));
    let dtype = result_type(&ops);
    if dtype == DType::Bool {
        return Err(TensorError::dtype(
            op,
            "clamp is not implemented for bool tensors with bool bounds",
        ));
    }
    Ok(dtype)
}

/// clamp's bounds as PyTorch 2.15 takes them for the computation dtype
/// `dtype`. A float dtype needs each bound to convert without overflow (a
/// bound of 70000 on an f16 tensor is an error, not inf). An integer dtype
/// compares the bounds with its range: a min above the largest value, or a
/// max below the smallest, is a `Value` error ("Clamp min value 300 is
/// outside the representable range of Byte"); a min below the smallest value
/// or a max above the largest clamps nothing and is dropped (u8 clamp(-1) is
/// the identity; earlier PyTorch versions wrapped -1 to 255).
pub(crate) fn clamp_bounds(
    op: &'static str,
    dtype: DType,
    lo: Option<Scalar>,
    hi: Option<Scalar>,
) -> Result<(Option<Scalar>, Option<Scalar>)> {
    if dtype.is_float() {
        for v in [lo, hi].into_iter().flatten() {
            check_fits(op, v, dtype)?;
        }
        return Ok((lo, hi));
    }
    let (min, max): (i128, i128) = match dtype {
        DType::U8 => (0, 255),
        DType::I32 => (i32::MIN as i128, i32::MAX as i128),
        _ => (i64::MIN as i128, i64::MAX as i128),
    };
    let int = |v: Scalar| -> i128 {
        match v {
            Scalar::Int(i) => i as i128,
            Scalar::Bool(b) => b as i128,
            // A float bound makes the computation dtype a float one.
            Scalar::Float(f) => f as i128,
        }
    };
    let outside = |what: &str, v: Scalar| {
        TensorError::value(
            op,
            format!(
                "Clamp {what} value {v} is outside the representable range of {}",
                dtype.torch_name()
            ),
        )
    };
    let lo = match lo {
        Some(v) if int(v) > max => return Err(outside("min", v)),
        Some(v) if int(v) < min => None,
        b => b,
    };
    let hi = match hi {
        Some(v) if int(v) < min => return Err(outside("max", v)),
        Some(v) if int(v) > max => None,
        b => b,
    };
    Ok((lo, hi))
}

#[cfg(test)]
mod tests {
    use crate::{DType, Device, Scalar, Tensor, TensorError};

    fn t(v: &[i64], d: DType) -> Tensor {
        let s: Vec<Scalar> = v.iter().map(|&x| Scalar::Int(x)).collect();
        Tensor::from_scalars(&s, &[v.len()], d, Device::Cpu).unwrap()
    }

    /// PyTorch 2.15's answers (probed on the CPU; fuzz_core.json has more).
    #[test]
    fn integer_clamp_bounds_beyond_the_dtype() {
        let u = t(&[0, 2, 200], DType::U8);
        let c = |lo: Option<i64>, hi: Option<i64>| u.clamp(lo, hi);
        // A bound beyond the range on the side where it clamps nothing is dropped.
        assert_eq!(
            c(Some(-1), None).unwrap().to_vec_as::<i64>().unwrap(),
            [0, 2, 200]
        );
        assert_eq!(
            c(Some(-3), Some(3)).unwrap().to_vec_as::<i64>().unwrap(),
            [0, 2, 3]
        );
        assert_eq!(
            c(None, Some(300)).unwrap().to_vec_as::<i64>().unwrap(),
            [0, 2, 200]
        );
        // On the other side it is a value error, in place too.
        assert!(matches!(c(Some(256), None), Err(TensorError::Value { .. })));
        assert!(matches!(c(None, Some(-1)), Err(TensorError::Value { .. })));
        assert!(matches!(
            u.clamp_(Some(300), None::<i64>),
            Err(TensorError::Value { .. })
        ));
        let i = t(&[-5, 2, 7], DType::I32);
        let r = i.clamp(None::<i64>, Some(3_000_000_000i64)).unwrap();
        assert_eq!(r.to_vec_as::<i64>().unwrap(), [-5, 2, 7]);
        assert!(i.clamp(Some(1i64 << 31), None::<i64>).is_err());
        // clamp_ of an integer tensor with a float bound: the cast is checked
        // before the overlap of an expanded output.
        let e = t(&[1], DType::I32).expand(&[3]).unwrap();
        assert!(matches!(
            e.clamp_(Some(0.5), None::<f64>),
            Err(TensorError::DType { .. })
        ));
        assert!(matches!(e.neg_(), Err(TensorError::Overlap { .. })));
    }

    /// PyTorch's CPU addcmul computes `x + v * t1 * t2` as
    /// fma(v * t1, t2, x) (the compiler contracts its kernel's expression),
    /// rounding the product and the sum once; strata rounded the product
    /// first. Found by the forward oracle's addcmul family (session 44,
    /// fuzz_ops seed 3188 case 0655: an f16/f32 mix). PyTorch 2.15:
    ///
    /// ```python
    /// torch.addcmul(torch.tensor([-1.375]), torch.tensor([-1.5]),
    ///               torch.tensor([1.0000000150474662e30]), value=-1)
    /// # tensor([1.4999999470133356e+30])  (1.5 * t2 alone rounds up: 1.500000098129063e+30)
    /// torch.addcmul(torch.tensor([-1.0], dtype=torch.float64), torch.tensor([1.5], dtype=torch.float64),
    ///               torch.tensor([float.fromhex('0x1.0000000000001p+60')], dtype=torch.float64))
    /// # 0x1.8000000000001p+60  (x + t1 * t2: 0x1.8000000000002p+60)
    /// ```
    #[test]
    fn addcmul_rounds_the_product_and_the_sum_once_as_pytorch() {
        let f = |v: &[f32]| Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap();
        // 1.0000000150474662e30 and 1.4999999470133356e30 as f32
        let (big, want) = (f32::from_bits(0x7149_f2ca), f32::from_bits(0x7197_7617));
        let t2 = f(&[big; 9]);
        let (x, t1) = (f(&[-1.375; 9]), f(&[-1.5; 9]));
        let r = x.addcmul(&t1, &t2, -1).unwrap().to_vec::<f32>().unwrap();
        assert!(r.iter().all(|&v| v == want), "{r:?}");
        // In place, and with an f16 self promoted to f32.
        x.addcmul_(&t1, &t2, -1).unwrap();
        assert_eq!(x.to_vec::<f32>().unwrap(), r);
        let h = f(&[-1.375]).to_dtype_contiguous(DType::F16).unwrap();
        let r = h.addcmul(&f(&[-1.5]), &f(&[big]), -1).unwrap();
        assert_eq!(r.to_vec::<f32>().unwrap(), [want]);
        let d = |v: f64| Tensor::from_slice(&[v], &[1], Device::Cpu).unwrap();
        let big = f64::from_bits(0x43B0_0000_0000_0001); // 0x1.0000000000001p+60
        let r = d(-1.0).addcmul(&d(1.5), &d(big), 1).unwrap();
        assert_eq!(
            r.to_vec::<f64>().unwrap()[0].to_bits(),
            0x43B8_0000_0000_0001
        );
    }

    #[test]
    fn addcmul_value_converts_into_integer_tensors_and_where_takes_u8() {
        let x = t(&[1, 2, 3], DType::I32);
        let a = t(&[2, 3, 4], DType::I32);
        x.addcmul_(&a, &a, 1.25).unwrap();
        assert_eq!(x.to_vec_as::<i64>().unwrap(), [5, 11, 19]);
        let u = t(&[1, 2, 3], DType::U8);
        let b = t(&[2, 3, 4], DType::U8);
        assert!(matches!(
            u.addcmul_(&b, &b, -1.0),
            Err(TensorError::Value { .. })
        ));
        u.addcmul_(&b, &b, -1).unwrap();
        assert_eq!(u.to_vec_as::<i64>().unwrap(), [253, 249, 243]);
        let cond = t(&[0, 7, 1], DType::U8);
        let r = Tensor::where_cond(&cond, Scalar::Int(1), Scalar::Int(0)).unwrap();
        assert_eq!(r.to_vec_as::<i64>().unwrap(), [0, 1, 1]);
        // An int scalar divisor that wraps to 0 in u8 is a division by zero.
        let e = u
            .div_mode(Scalar::Int(1 << 31), crate::RoundingMode::Floor)
            .unwrap_err();
        assert!(matches!(e, TensorError::Value { .. }));
    }
}
