//! Model files and arrays: a model's parameters through safetensors, tensors
//! through NumPy's `.npy` and `ndarray`, and files written by PyTorch and
//! NumPy read back, every value checked.
//!
//!     cargo run --release -p strata-examples --example interop -- [--out DIR] [--load FILE]...
//!
//! * Writes `DIR/strata_tensors.safetensors` (a small model's parameters in
//!   f32, bf16 and f16, plus one tensor of every other dtype, a 0-d, an
//!   empty and a transposed one) and `DIR/strata_*.npy`, from tensors on the
//!   device named by `STRATA_DEVICE` (default: a GPU when present), reads
//!   them back onto that device and checks them.
//! * `--load FILE` (repeatable; `.safetensors` or `.npy`) reads a file written
//!   by PyTorch or NumPy (`examples/interop_check.py` writes them) and checks
//!   every tensor in it against the values both sides compute by the same
//!   rule ([`expected`]).
//!
//! Every tensor's values follow one rule of its dtype, its element count `n`
//! and the row-major index `i`, so either side can check the other without
//! trusting it: floats `(i - n/2) * 0.25`, integers `3i - 7`, u8
//! `37i mod 256`, bool `i mod 3 == 0`. `examples/interop_roundtrip.sh` runs the
//! whole exchange with PyTorch.
//!
//! Prints one line per check (`PASS`/`FAIL`) and exits non-zero on a failure.

use std::path::{Path, PathBuf};
use strata::autograd::Var;
use strata::{default_device, DType, Device, Tensor};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The value of element `i` of an `n`-element tensor of `dtype` (see the module docs).
fn value(dtype: DType, i: usize, n: usize) -> f64 {
    match dtype {
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => (i as f64 - (n / 2) as f64) * 0.25,
        DType::I64 | DType::I32 => 3.0 * i as f64 - 7.0,
        DType::U8 => ((37 * i) % 256) as f64,
        DType::Bool => f64::from(u8::from(i.is_multiple_of(3))),
    }
}

/// The tensor of `shape` and `dtype` whose values follow the rule.
fn expected(dtype: DType, shape: &[usize], device: Device) -> Res<Tensor> {
    let n = shape.iter().product::<usize>();
    let v: Vec<f64> = (0..n).map(|i| value(dtype, i, n)).collect();
    Ok(Tensor::from_slice(&v, shape, Device::Cpu)?
        .to_dtype(dtype)?
        .to(device)?)
}

struct Checks {
    passed: usize,
    failed: usize,
}

impl Checks {
    fn check(&mut self, ok: bool, what: &str) {
        if ok {
            self.passed += 1;
            println!("PASS {what}");
        } else {
            self.failed += 1;
            println!("FAIL {what}");
        }
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}

fn run() -> Res<()> {
    let mut out = std::env::temp_dir().join("strata-interop");
    let mut loads: Vec<PathBuf> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--out" => out = args.next().ok_or("--out needs a directory")?.into(),
            "--load" => loads.push(args.next().ok_or("--load needs a file")?.into()),
            "-h" | "--help" => {
                println!("usage: interop [--out DIR] [--load FILE.safetensors|FILE.npy]...");
                return Ok(());
            }
            other => return Err(format!("unknown argument {other:?} (try --help)").into()),
        }
    }
    let device = default_device()?;
    std::fs::create_dir_all(&out)?;
    println!("device: {device}; writing to {}", out.display());
    let mut c = Checks {
        passed: 0,
        failed: 0,
    };

    // ---- a model's parameters (and one tensor of each other dtype) through safetensors ----
    let params = [
        ("fc1.weight", DType::F32, vec![8, 4]),
        ("fc1.bias", DType::F32, vec![8]),
        ("fc2.weight", DType::BF16, vec![2, 8]),
        ("fc2.bias", DType::F16, vec![2]),
    ];
    let mut named: Vec<(String, Tensor)> = Vec::new();
    for (name, dtype, shape) in &params {
        let p = Var::parameter(expected(*dtype, shape, device)?)?;
        named.push((name.to_string(), p.data().clone()));
    }
    for (name, dtype, shape) in [
        ("f64", DType::F64, vec![3, 3]),
        ("i64", DType::I64, vec![5]),
        ("i32", DType::I32, vec![2, 3]),
        ("u8", DType::U8, vec![4, 4]),
        ("bool", DType::Bool, vec![7]),
        ("scalar", DType::F32, vec![]),
        ("empty", DType::F32, vec![0, 3]),
    ] {
        named.push((name.to_string(), expected(dtype, &shape, device)?));
    }
    // Non-contiguous: the transpose of the rule's [5, 3] tensor, saved as a contiguous [3, 5].
    let transposed = expected(DType::F32, &[5, 3], device)?.t()?;
    named.push(("transposed".into(), transposed.clone()));

    let st = out.join("strata_tensors.safetensors");
    strata::save_safetensors(&st, named.iter().map(|(n, t)| (n.as_str(), t)))?;
    println!("wrote {} ({} tensors)", st.display(), named.len());
    let back = strata::load_safetensors(&st, device)?;
    c.check(
        back.len() == named.len(),
        "safetensors: every tensor read back",
    );
    for (name, t) in &named {
        let ok = back.get(name).is_some_and(|b| {
            b.device() == device
                && b.dtype() == t.dtype()
                && b.shape() == t.shape()
                && b.equal(t).unwrap_or(false)
        });
        c.check(
            ok,
            &format!(
                "safetensors round trip {name} {} {:?}",
                t.dtype(),
                t.shape()
            ),
        );
    }

    // ---- tensors through .npy ----
    for (file, t) in [
        ("strata_f32.npy", expected(DType::F32, &[2, 3, 4], device)?),
        ("strata_f16.npy", expected(DType::F16, &[3, 2], device)?),
        ("strata_i64.npy", expected(DType::I64, &[5], device)?),
        ("strata_bool.npy", expected(DType::Bool, &[7], device)?),
        ("strata_u8.npy", expected(DType::U8, &[2, 2], device)?),
        ("strata_transposed.npy", transposed.clone()),
    ] {
        let path = out.join(file);
        strata::save_npy(&path, &t)?;
        let b = strata::load_npy(&path, device)?;
        c.check(
            b.dtype() == t.dtype() && b.shape() == t.shape() && b.equal(&t)?,
            &format!("npy round trip {file} {} {:?}", t.dtype(), t.shape()),
        );
    }
    let bf = strata::save_npy(out.join("bf16.npy"), &named[2].1);
    c.check(
        matches!(bf, Err(strata::TensorError::DType { .. })),
        "npy refuses bf16 with a typed error",
    );

    // ---- ndarray (a copy either way; strides respected) ----
    let a: ndarray::ArrayD<f32> = transposed.to_ndarray()?;
    let ok = a.shape() == [3, 5]
        && (0..3).all(|i| (0..5).all(|j| a[[i, j]] as f64 == value(DType::F32, j * 3 + i, 15)));
    c.check(ok, "ndarray from a transposed tensor");
    let t = Tensor::from_ndarray(&a.t(), device)?;
    c.check(
        t.equal(&expected(DType::F32, &[5, 3], device)?)?,
        "tensor from a transposed ndarray view",
    );

    // ---- files from PyTorch and NumPy ----
    for path in &loads {
        check_file(&mut c, path, device)?;
    }

    println!("interop: {} checks passed, {} failed", c.passed, c.failed);
    if c.failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}

/// Loads a `.safetensors` or `.npy` file and checks every tensor against the rule.
fn check_file(c: &mut Checks, path: &Path, device: Device) -> Res<()> {
    let tensors: Vec<(String, Tensor)> = match path.extension().and_then(|e| e.to_str()) {
        Some("npy") => vec![(String::new(), strata::load_npy(path, device)?)],
        Some("safetensors") => {
            let mut v: Vec<_> = strata::load_safetensors(path, device)?
                .into_iter()
                .collect();
            v.sort_by(|a, b| a.0.cmp(&b.0));
            v
        }
        _ => return Err(format!("{}: not a .npy or .safetensors file", path.display()).into()),
    };
    for (name, t) in tensors {
        let want = expected(t.dtype(), t.shape(), device)?;
        c.check(
            t.device() == device && t.equal(&want)?,
            &format!(
                "loaded {}{}{} {} {:?}",
                path.file_name().and_then(|f| f.to_str()).unwrap_or("?"),
                if name.is_empty() { "" } else { ":" },
                name,
                t.dtype(),
                t.shape()
            ),
        );
        if t.numel() <= 8 {
            println!("     {t}");
        }
    }
    Ok(())
}
