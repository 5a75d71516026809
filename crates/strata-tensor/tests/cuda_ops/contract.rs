//! Session 60's ops on `cuda:0` against the CPU: einsum, tensordot, inner,
//! outer, kron, diagonal/diag/diag_embed/trace, baddbmm/addbmm/addmv/addr,
//! lerp and cross, on random shapes, dtypes and layouts (transposed,
//! sliced, narrowed, broadcast), with sizes past one block and one grid
//! dimension (rows of 100k elements, 70k rows, 70k batches). The ops are
//! compositions of existing ops (no kernel of their own), so these check
//! the compositions on the GPU: views and element-wise ops exactly (`lerp`
//! and `cross` are PyTorch's fused formulas through `addcmul`'s explicit
//! `fma`, bit for bit with the CPU), products within a tolerance.

use super::*;

/// `x` (CPU) and `y` (GPU) bit for bit (as f64; NaN equal to NaN).
fn assert_bits(what: &str, x: &Tensor, y: &Tensor) -> Result<()> {
    assert_eq!(x.shape(), y.shape(), "{what}: shape");
    assert_eq!(x.dtype(), y.dtype(), "{what}: dtype");
    let xs = x.to_dtype(DType::F64)?.to_vec::<f64>()?;
    let ys = y.to(Device::Cpu)?.to_dtype(DType::F64)?.to_vec::<f64>()?;
    for (i, (p, q)) in xs.iter().zip(&ys).enumerate() {
        assert!(
            p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan()),
            "{what}: element {i}: cpu {p} vs gpu {q}"
        );
    }
    Ok(())
}

const FLOATS: [DType; 4] = [DType::F32, DType::F64, DType::F16, DType::BF16];

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn contractions_match_cpu() -> Result<()> {
    let dev = gpu();
    let mut rng = Rng(0x60);
    for case in 0..40u64 {
        let dtype = DTYPES[rng.below(6) as usize];
        let (m, k, n) = (
            1 + rng.below(40) as usize,
            rng.below(50) as usize,
            1 + rng.below(40) as usize,
        );
        let b = 1 + rng.below(5) as usize;
        let (a, abase) = view(m, k, rng.below(6), dtype, 100 + case)?;
        let (c, cbase) = view(k, n, rng.below(6), dtype, 200 + case)?;
        let (ga, gc) = (twin(&a, &abase, dev)?, twin(&c, &cbase, dev)?);
        let what = format!("case {case} {dtype} {m}x{k}x{n}");
        for eq in ["ij,jk->ik", "ij,jk", "ij,jk->ki", "ij,jk->"] {
            let x = Tensor::einsum(eq, &[&a, &c])?;
            let y = Tensor::einsum(eq, &[&ga, &gc])?;
            assert_product_close(&format!("{what} einsum {eq}"), &x, &y, k * (m + n))?;
        }
        let x = a.tensordot(&c, 1)?;
        let y = ga.tensordot(&gc, 1)?;
        assert_product_close(&format!("{what} tensordot"), &x, &y, k)?;
        let x = a.inner(&c.t()?)?;
        let y = ga.inner(&gc.t()?)?;
        assert_product_close(&format!("{what} inner"), &x, &y, k)?;
        // Batched: [b, m, k] @ [b, k, n] with a broadcast added tensor.
        let x1 = data(&[b, m, k], dtype, 300 + case)?;
        let x2 = data(&[b, n, k], dtype, 400 + case)?.transpose(1, 2)?;
        let add = data(&[m, 1], dtype, 500 + case)?;
        let (g1, g2, gadd) = (x1.to(dev)?, x2.to(dev)?.contiguous()?, add.to(dev)?);
        let g2 = g2.clone();
        for (beta, alpha) in [(1.0, 1.0), (0.0, 2.0), (0.5, -1.0)] {
            let s = |v: f64| {
                if dtype.is_float() {
                    Scalar::Float(v)
                } else {
                    Scalar::Int(v as i64)
                }
            };
            let x = add.baddbmm(&x1, &x2, s(beta), s(alpha))?;
            let y = gadd.baddbmm(&g1, &g2, s(beta), s(alpha))?;
            assert_product_close(&format!("{what} baddbmm {beta} {alpha}"), &x, &y, k)?;
            let x = add.addbmm(&x1, &x2, s(beta), s(alpha))?;
            let y = gadd.addbmm(&g1, &g2, s(beta), s(alpha))?;
            assert_product_close(&format!("{what} addbmm {beta} {alpha}"), &x, &y, k * b)?;
            let v = data(&[k], dtype, 600 + case)?;
            let self_v = data(&[m], dtype, 700 + case)?;
            let x = self_v.addmv(&a, &v, s(beta), s(alpha))?;
            let y = self_v.to(dev)?.addmv(&ga, &v.to(dev)?, s(beta), s(alpha))?;
            assert_product_close(&format!("{what} addmv {beta} {alpha}"), &x, &y, k)?;
        }
    }
    // Three operands, an ellipsis, a repeated label and a broadcast label.
    for dtype in FLOATS {
        let a = data(&[4, 5, 5, 3], dtype, 1)?;
        let b = data(&[3, 6], dtype, 2)?;
        let c = data(&[1, 6, 2], dtype, 3)?;
        let eq = "...iij,jk,zkl->...il";
        let x = Tensor::einsum(eq, &[&a, &b, &c])?;
        let y = Tensor::einsum(eq, &[&a.to(dev)?, &b.to(dev)?, &c.to(dev)?])?;
        assert_product_close(&format!("{dtype} {eq}"), &x, &y, 18)?;
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn views_and_exact_ops_match_cpu_in_every_dtype() -> Result<()> {
    let dev = gpu();
    let mut rng = Rng(0x61);
    for case in 0..30u64 {
        let dtype = DTYPES[(case % 8) as usize];
        let (r, c) = (1 + rng.below(30) as usize, 1 + rng.below(30) as usize);
        let (a, base) = view(r, c, rng.below(6), dtype, 800 + case)?;
        let ga = twin(&a, &base, dev)?;
        let what = format!("case {case} {dtype} {r}x{c}");
        let off = rng.below(9) as i64 - 4;
        assert_bits(
            &format!("{what} diagonal"),
            &a.diagonal(off, 0, 1)?,
            &ga.diagonal(off, 0, 1)?,
        )?;
        assert_bits(
            &format!("{what} diagonal t"),
            &a.diagonal(off, 1, 0)?,
            &ga.diagonal(off, -1, -2)?,
        )?;
        assert_bits(&format!("{what} diag"), &a.diag(off)?, &ga.diag(off)?)?;
        let row = a.narrow(0, 0, 1)?.squeeze_dims(&[0])?;
        let grow = ga.narrow(0, 0, 1)?.squeeze_dims(&[0])?;
        assert_bits(
            &format!("{what} diag 1-D"),
            &row.diag(off)?,
            &grow.diag(off)?,
        )?;
        assert_bits(
            &format!("{what} diag_embed"),
            &a.diag_embed(off, 0, 2)?,
            &ga.diag_embed(off, 0, 2)?,
        )?;
        assert_bits(
            &format!("{what} outer"),
            &row.outer(&row)?,
            &grow.outer(&grow)?,
        )?;
        // kron of some strided operands is PyTorch's view error (its final
        // reshape cannot view the product): the same error on both devices.
        match (a.kron(&row), ga.kron(&grow)) {
            (Ok(x), Ok(y)) => assert_bits(&format!("{what} kron"), &x, &y)?,
            (Err(x), Err(y)) => assert_eq!(
                std::mem::discriminant(&x),
                std::mem::discriminant(&y),
                "{what} kron: cpu {x} vs gpu {y}"
            ),
            (x, y) => panic!("{what} kron: cpu {x:?} vs gpu {y:?}"),
        }
        if dtype != DType::Bool {
            let x = a.trace()?;
            let y = ga.trace()?;
            check_same(&format!("{what} trace"), &x, &y, true);
        }
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn lerp_and_cross_are_bit_for_bit_with_the_cpu() -> Result<()> {
    let dev = gpu();
    let mut rng = Rng(0x62);
    for dtype in FLOATS {
        for case in 0..12u64 {
            let (r, c) = (1 + rng.below(40) as usize, 1 + rng.below(40) as usize);
            let (a, ab) = view(r, c, rng.below(6), dtype, 900 + case)?;
            let (b, bb) = view(r, c, rng.below(6), dtype, 1000 + case)?;
            let (ga, gb) = (twin(&a, &ab, dev)?, twin(&b, &bb, dev)?);
            let what = format!("{dtype} case {case} {r}x{c}");
            for w in [0.25, 0.5, 0.75, -1.5, 3.0, f64::NAN] {
                assert_bits(
                    &format!("{what} lerp {w}"),
                    &a.lerp(&b, w)?,
                    &ga.lerp(&gb, w)?,
                )?;
            }
            let w = data(&[1, c], dtype, 1100 + case)?
                .mul(0.1)?
                .to_dtype(dtype)?;
            let gw = w.to(dev)?;
            assert_bits(
                &format!("{what} lerp tensor"),
                &a.lerp(&b, &w)?,
                &ga.lerp(&gb, &gw)?,
            )?;
            // cross along a dim of 3, broadcast.
            let (x, xb) = view(3, c, rng.below(6), dtype, 1200 + case)?;
            let y = data(&[3, 1], dtype, 1300 + case)?;
            let (gx, gy) = (twin(&x, &xb, dev)?, y.to(dev)?);
            assert_bits(
                &format!("{what} cross"),
                &x.cross(&y, 0)?,
                &gx.cross(&gy, 0)?,
            )?;
        }
    }
    for dtype in [DType::I32, DType::I64, DType::U8] {
        let x = data(&[50, 3], dtype, 1)?;
        let y = data(&[50, 3], dtype, 2)?;
        assert_bits(
            &format!("{dtype} cross"),
            &x.cross(&y, 1)?,
            &x.to(dev)?.cross(&y.to(dev)?, 1)?,
        )?;
    }
    Ok(())
}

/// Sizes past one block, one grid dimension (65,535) and 2^16 batches.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn large_shapes_match_cpu() -> Result<()> {
    let dev = gpu();
    // Rows of 100k elements; 70k rows.
    let a = data(&[3, 100_003], DType::F32, 1)?;
    let b = data(&[3, 100_003], DType::F32, 2)?;
    let (ga, gb) = (a.to(dev)?, b.to(dev)?);
    assert_bits("lerp 100k", &a.lerp(&b, 0.7)?, &ga.lerp(&gb, 0.7)?)?;
    assert_bits("cross 100k columns", &a.cross(&b, 0)?, &ga.cross(&gb, 0)?)?;
    let w = data(&[100_003], DType::F32, 3)?.mul(0.05)?;
    assert_bits(
        "lerp 100k tensor",
        &a.lerp(&b, &w)?,
        &ga.lerp(&gb, &w.to(dev)?)?,
    )?;
    let x = data(&[70_001, 3], DType::BF16, 4)?;
    let y = data(&[70_001, 3], DType::BF16, 5)?;
    assert_bits(
        "cross 70k rows",
        &x.cross(&y, -1)?,
        &x.to(dev)?.cross(&y.to(dev)?, -1)?,
    )?;
    // 70k batches of small products (cuBLAS's batched GEMM past a grid dim).
    let p = data(&[70_001, 2, 3], DType::F32, 6)?;
    let q = data(&[70_001, 3, 2], DType::F32, 7)?;
    let c = data(&[2], DType::F32, 8)?;
    let (gp, gq, gc) = (p.to(dev)?, q.to(dev)?, c.to(dev)?);
    assert_product_close(
        "baddbmm 70k",
        &c.baddbmm(&p, &q, 1, 1)?,
        &gc.baddbmm(&gp, &gq, 1, 1)?,
        3,
    )?;
    assert_product_close(
        "einsum 70k",
        &Tensor::einsum("bij,bjk->bik", &[&p, &q])?,
        &Tensor::einsum("bij,bjk->bik", &[&gp, &gq])?,
        3,
    )?;
    assert_product_close(
        "addbmm 70k",
        &c.addbmm(&p, &q, 0.5, 2)?,
        &gc.addbmm(&gp, &gq, 0.5, 2)?,
        3 * 70_001,
    )?;
    // A long diagonal view and its trace; a 4000 x 4000 diag.
    let m = data(&[100_000, 3], DType::F64, 9)?;
    let gm = m.to(dev)?;
    assert_bits(
        "diagonal of a tall matrix",
        &m.diagonal(-5, 0, 1)?,
        &gm.diagonal(-5, 0, 1)?,
    )?;
    check_same("trace of a tall matrix", &m.trace()?, &gm.trace()?, true);
    let v = data(&[4000], DType::F16, 10)?;
    assert_bits("diag 4000", &v.diag(1)?, &v.to(dev)?.diag(1)?)?;
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn gpu_errors_are_typed() -> Result<()> {
    let dev = gpu();
    let a = Tensor::ones(&[3], DType::F32, dev)?;
    let c = Tensor::ones(&[3], DType::F32, Device::Cpu)?;
    assert!(matches!(
        a.outer(&c),
        Err(TensorError::DeviceMismatch { .. })
    ));
    assert!(matches!(
        Tensor::einsum("i,i", &[&a, &c]),
        Err(TensorError::DeviceMismatch { .. })
    ));
    assert!(matches!(
        a.lerp(&c, 0.5),
        Err(TensorError::DeviceMismatch { .. })
    ));
    assert!(matches!(
        a.cross(&c, 0),
        Err(TensorError::DeviceMismatch { .. })
    ));
    Ok(())
}
