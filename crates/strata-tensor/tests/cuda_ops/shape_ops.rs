//! Session 60's shape ops on `cuda:0` against the CPU (both exact: they
//! copy elements, or, for `clamp_tensor`, compare and select them): flip,
//! roll, repeat, tile, repeat_interleave, pad in every mode and clamp with
//! tensor bounds, on random 2-D views (contiguous, transposed, stepped,
//! narrowed, broadcast) of every dtype; rows of 100k elements, 70k rows, a
//! result past 2^31 elements (64-bit positions), ranks past the kernel's
//! 12 dims (the host loop), empty and 0-d tensors.

use super::*;
use strata_tensor::PadMode;

/// Runs `f` on the CPU view and on its GPU twin and compares.
fn both(
    what: &str,
    cpu: &Tensor,
    base: &Tensor,
    dev: Device,
    f: impl Fn(&Tensor) -> Result<Tensor>,
) {
    let g = twin(cpu, base, dev).expect("twin");
    match (f(cpu), f(&g)) {
        (Ok(c), Ok(gr)) => {
            assert_eq!(gr.device(), dev, "{what}: device");
            // The copies choose their layout alike on both devices (clamp's
            // follows the element-wise ops', which may differ by device).
            if !what.contains("clamp") {
                assert_eq!(c.strides(), gr.strides(), "{what}: strides");
            }
            assert_same(what, &c, &gr);
        }
        (Err(a), Err(b)) => assert_eq!(
            std::mem::discriminant(&a),
            std::mem::discriminant(&b),
            "{what}: cpu {a} vs gpu {b}"
        ),
        (a, b) => panic!(
            "{what}: cpu {:?} vs gpu {:?}",
            a.map(|t| t.shape().to_vec()),
            b.map(|t| t.shape().to_vec())
        ),
    }
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn shape_ops_match_cpu_on_random_layouts() -> Result<()> {
    let dev = gpu();
    let mut rng = Rng(0x60a);
    for case in 0..160u64 {
        let dtype = DTYPES[rng.below(8) as usize];
        let (r, c) = (1 + rng.below(9) as usize, 1 + rng.below(9) as usize);
        let kind = rng.below(6);
        let (x, base) = view(r, c, kind, dtype, case)?;
        let s = rng.below(40) as i64 - 20;
        let k = rng.below(4) as i64;
        let w = format!("case {case} {dtype:?} [{r}, {c}] kind {kind}");
        both(&format!("{w} flip"), &x, &base, dev, |t| t.flip(&[0, 1]));
        both(&format!("{w} flip -1"), &x, &base, dev, |t| t.flip(&[-1]));
        both(&format!("{w} roll"), &x, &base, dev, |t| {
            t.roll(&[s, k], &[1, 0])
        });
        both(&format!("{w} roll flat"), &x, &base, dev, |t| {
            t.roll(&[s], &[])
        });
        both(&format!("{w} repeat"), &x, &base, dev, |t| {
            t.repeat(&[2, k, 3])
        });
        both(&format!("{w} tile"), &x, &base, dev, |t| t.tile(&[k + 1]));
        both(&format!("{w} repeat_interleave"), &x, &base, dev, |t| {
            t.repeat_interleave(k as usize, Some(1))
        });
        both(
            &format!("{w} repeat_interleave flat"),
            &x,
            &base,
            dev,
            |t| t.repeat_interleave(2, None),
        );
        let counts: Vec<i64> = (0..r).map(|i| ((i as u64 * 7 + case) % 4) as i64).collect();
        both(
            &format!("{w} repeat_interleave counts"),
            &x,
            &base,
            dev,
            |t| {
                let ct = Tensor::from_slice(&counts, &[r], t.device())?;
                t.repeat_interleave(&ct, Some(0))
            },
        );
        let pads = [s % 4, k - 1, (s / 3) % 3, 2 - k];
        both(&format!("{w} pad constant"), &x, &base, dev, |t| {
            t.pad(&pads, PadMode::Constant(Scalar::Int(1)))
        });
        for mode in [PadMode::Reflect, PadMode::Replicate, PadMode::Circular] {
            both(&format!("{w} pad {mode:?}"), &x, &base, dev, |t| {
                t.pad(&pads[..2], mode)
            });
            both(&format!("{w} pad3d {mode:?}"), &x, &base, dev, |t| {
                t.unsqueeze(0)?.pad(&pads, mode)
            });
        }
        if dtype != DType::Bool {
            let lo = data(&[c], dtype, case + 1)?;
            let hi = data(&[r, 1], DType::F32, case + 2)?;
            both(&format!("{w} clamp_tensor"), &x, &base, dev, |t| {
                t.clamp_tensor(Some(&lo.to(t.device())?), Some(&hi.to(t.device())?))
            });
        }
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn shape_ops_on_long_rows_many_rows_and_high_ranks() -> Result<()> {
    let dev = gpu();
    // Rows of 100k elements, 70k rows, transposed too.
    for (shape, dtype) in [
        ([3usize, 100_000usize], DType::F32),
        ([70_000, 3], DType::BF16),
        ([70_000, 2], DType::I64),
    ] {
        let x = data(&shape, dtype, 9)?;
        let g = x.to(dev)?;
        for (what, f) in [
            (
                "flip",
                Box::new(|t: &Tensor| t.flip(&[0, 1])) as Box<dyn Fn(&Tensor) -> Result<Tensor>>,
            ),
            ("roll", Box::new(|t: &Tensor| t.roll(&[12_345, 1], &[1, 0]))),
            ("repeat", Box::new(|t: &Tensor| t.repeat(&[2, 3]))),
            (
                "repeat_interleave",
                Box::new(|t: &Tensor| t.repeat_interleave(3, Some(0))),
            ),
            (
                "pad constant",
                Box::new(|t: &Tensor| t.pad(&[5, -1, 2, 3], PadMode::Constant(Scalar::Int(7)))),
            ),
            (
                "pad reflect",
                Box::new(|t: &Tensor| t.unsqueeze(0)?.pad(&[1, 1], PadMode::Reflect)),
            ),
            (
                "pad circular",
                Box::new(|t: &Tensor| t.unsqueeze(0)?.pad(&[2, 1], PadMode::Circular)),
            ),
            (
                "pad replicate t",
                Box::new(|t: &Tensor| t.t()?.unsqueeze(0)?.pad(&[9, 4], PadMode::Replicate)),
            ),
        ] {
            assert_same(&format!("{what} {shape:?} {dtype:?}"), &f(&x)?, &f(&g)?);
        }
    }
    // Rank 14 (past the kernel's 12 dims: the host loops over two).
    let shape = [2usize; 14];
    let x = data(&shape, DType::F32, 3)?;
    let g = x.to(dev)?;
    let dims: Vec<i64> = (0..14).collect();
    assert_same("flip rank 14", &x.flip(&dims)?, &g.flip(&dims)?);
    let shifts = [1i64; 14];
    assert_same(
        "roll rank 14",
        &x.roll(&shifts, &dims)?,
        &g.roll(&shifts, &dims)?,
    );
    let pads = [1i64; 28];
    let pc = PadMode::Constant(Scalar::Float(-1.5));
    assert_same("pad rank 14", &x.pad(&pads, pc)?, &g.pad(&pads, pc)?);
    assert_same("repeat rank 15", &x.repeat(&[2; 15])?, &g.repeat(&[2; 15])?);
    // Empty and 0-d.
    let e = Tensor::zeros(&[0, 3], DType::F32, dev)?;
    assert_eq!(e.flip(&[0])?.shape(), [0, 3]);
    assert_eq!(
        e.pad(&[1, 1, 1, 1], PadMode::Constant(Scalar::Int(2)))?
            .to(Device::Cpu)?
            .to_vec::<f32>()?,
        [2.0; 10]
    );
    let z = Tensor::scalar(4.0, DType::F64, dev)?;
    assert_eq!(z.flip(&[0])?.item::<f64>()?, 4.0);
    assert_eq!(
        z.repeat(&[2, 2])?.to(Device::Cpu)?.to_vec::<f64>()?,
        [4.0; 4]
    );
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn repeat_past_two_to_the_31_elements() -> Result<()> {
    let dev = gpu();
    // 3 u8 elements repeated into 2^31 + 3 * 5 = 2,147,483,663 elements: every
    // position is one more than i32::MAX can address.
    let x = Tensor::from_slice(&[1u8, 2, 3], &[3], Device::Cpu)?.to(dev)?;
    let n = (1usize << 31) / 3 + 5;
    let r = x.repeat(&[n as i64])?;
    assert_eq!(r.numel(), 3 * n);
    for p in [
        0usize,
        1,
        2,
        (1 << 31) - 1,
        1 << 31,
        (1 << 31) + 1,
        3 * n - 1,
    ] {
        let v = r.narrow(0, p as i64, 1)?.to(Device::Cpu)?.to_vec::<u8>()?[0];
        assert_eq!(v, [1, 2, 3][p % 3], "position {p}");
    }
    let f = r.flip(&[0])?;
    let v = f
        .narrow(0, (3 * n - 1) as i64, 1)?
        .to(Device::Cpu)?
        .to_vec::<u8>()?[0];
    assert_eq!(v, 1, "flipped last element");
    Ok(())
}

/// Session 61's layout rules and quirks on `cuda:0` against the CPU (which
/// the oracle fixture holds to PyTorch's): roll of a channels-last(-3d)
/// input (a cat of two pieces per shift), reflection and replication pads
/// following a channels-last(-3d) input while circular padding is
/// row-major, repeat_interleave with u8 counts reading positions modulo
/// 256, and kron of a transposed operand failing as on the CPU.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn channels_last_layouts_and_u8_counts_match_cpu() -> Result<()> {
    let dev = gpu();
    for (case, dtype) in DTYPES.into_iter().enumerate() {
        // [2, 3, 5, 4] laid out channels-last, and [2, 3, 4, 5, 3] laid out
        // channels-last-3d: permutes of row-major bases.
        let b4 = data(&[2, 5, 4, 3], dtype, case as u64)?;
        let x4 = b4.permute(&[0, 3, 1, 2])?;
        let b5 = data(&[2, 4, 5, 3, 3], dtype, 40 + case as u64)?;
        let x5 = b5.permute(&[0, 4, 1, 2, 3])?;
        for (x, base) in [(&x4, &b4), (&x5, &b5)] {
            let w = format!("{dtype:?} {:?} strides {:?}", x.shape(), x.strides());
            for (shifts, dims) in [
                (vec![1i64], vec![1i64]),
                (vec![2, -1], vec![1, 3]),
                (vec![3], vec![1]),
                (vec![0, 2], vec![2, -1]),
            ] {
                both(
                    &format!("{w} roll {shifts:?} {dims:?}"),
                    x,
                    base,
                    dev,
                    |t| t.roll(&shifts, &dims),
                );
            }
            both(&format!("{w} roll flat"), x, base, dev, |t| {
                t.roll(&[5], &[])
            });
            let pads: &[i64] = if x.ndim() == 4 {
                &[1, 2, 1, 0]
            } else {
                &[1, 1, 0, 2, 1, 1]
            };
            for mode in [
                PadMode::Reflect,
                PadMode::Replicate,
                PadMode::Circular,
                PadMode::Constant(Scalar::Int(3)),
            ] {
                both(&format!("{w} pad {mode:?}"), x, base, dev, |t| {
                    t.pad(pads, mode)
                });
            }
        }
        // u8 counts over 300 rows: rows 256 and on are read as rows 0 and on.
        let b = data(&[300, 2], dtype, 80 + case as u64)?;
        let counts: Vec<u8> = (0..300).map(|i| (i % 3) as u8).collect();
        both(
            &format!("{dtype:?} repeat_interleave u8 counts"),
            &b,
            &b,
            dev,
            |t| {
                let ct = Tensor::from_slice(&counts, &[300], t.device())?;
                t.repeat_interleave(&ct, Some(0))
            },
        );
        let small = data(&[2, 3], dtype, 90 + case as u64)?;
        both(
            &format!("{dtype:?} kron transposed"),
            &small,
            &small,
            dev,
            |t| t.t()?.kron(t),
        );
    }
    Ok(())
}
