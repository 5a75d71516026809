//! The classic autograd memory pitfalls, measured with strata's allocator
//! statistics on the device named by `STRATA_DEVICE`.
//!
//! ```text
//! STRATA_DEVICE=cpu cargo run --release -p strata-examples --example leaks
//! ```
//!
//! 1. Keeping loss *tensors* (with their graphs) in a Vec instead of `loss.item()`.
//! 2. Skipping `zero_grad`.
//! 3. Carrying an RNN's hidden state across steps without `detach()`.
//!
//! Each case prints `allocated_bytes.all.current` after every step (as the
//! difference from before the first step) and a verdict. Trends are judged
//! from step 2 on: step 1 creates the gradients and the optimizer's state.
//! The example exits non-zero if any case does not behave as stated.
//!
//! The allocator records its history with backtraces, and each leaking case
//! ends with the leak finder's answer: a watch taken after the first step,
//! compared before the kept memory is dropped, names the lines of this file
//! whose allocations grew (`leak at leaks.rs:N`).

use std::process::ExitCode;
use strata::alloc::{HistoryLevel, Watch};
use strata::memory_allocated;
use strata_autograd::{AutogradError, Optimizer, Sgd, Var};
use strata_examples::autograd_demo::{mse, open_device, Mlp, Trend};
use strata_tensor::{DType, Device, Tensor};

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

const STEPS: usize = 8;
const BATCH: usize = 64;
const WIDTHS: [usize; 4] = [16, 128, 128, 1];

fn main() -> ExitCode {
    let device = match open_device() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    println!("device: {device}\n");
    match strata::allocator(device) {
        Ok(a) => a.record_history_with(Some(1 << 20), HistoryLevel::Backtraces),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    }
    let cases: [fn(Device) -> BoxResult<bool>; 3] = [keep_losses, skip_zero_grad, rnn_hidden];
    let mut all_ok = true;
    for case in cases {
        match case(device) {
            Ok(ok) => all_ok &= ok,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        }
        println!();
    }
    if all_ok {
        println!("every case behaved as stated");
        ExitCode::SUCCESS
    } else {
        println!("FAIL: some case did not behave as stated");
        ExitCode::FAILURE
    }
}

/// A batch of inputs and targets from `seed`.
fn batch(seed: u64, device: Device) -> BoxResult<(Var, Var)> {
    let x = Tensor::randn(&[BATCH, WIDTHS[0]], DType::F32, seed, device)?;
    let y = Tensor::randn(&[BATCH, 1], DType::F32, seed ^ 0xffff, device)?;
    Ok((Var::new(x), Var::new(y)))
}

/// Prints a table of per-step allocated bytes (relative to each series' start).
fn table(labels: &[&str], series: &[Vec<i64>]) {
    print!("  {:>4}", "step");
    for l in labels {
        print!(" {l:>28}");
    }
    println!();
    for step in 0..STEPS {
        print!("  {:>4}", step + 1);
        for s in series {
            print!(" {:>26} B", s[step]);
        }
        println!();
    }
}

/// Judges a series from step 2 on against the expected trend.
fn verdict(label: &str, series: &[i64], expected: Trend) -> bool {
    let tail: Vec<u64> = series[1..].iter().map(|&v| v as u64).collect();
    let trend = Trend::of(&tail);
    let per_step = (series[STEPS - 1] - series[1]) / (STEPS as i64 - 2);
    let detail = match trend {
        Trend::Grows => format!(" (+{per_step} B per step)"),
        _ => String::new(),
    };
    let ok = trend == expected;
    println!(
        "  {label}: allocated memory {trend}{detail} -> {}",
        if ok { "as stated" } else { "NOT as stated" }
    );
    ok
}

/// Prints the lines of this file, inside function `case`, whose live
/// allocations grew since `watch`, largest first.
fn print_leaks(watch: &Watch, device: Device, case: &str) -> BoxResult<()> {
    let allocator = strata::allocator(device)?;
    let grown = watch.grown_at_frame(&allocator, |f| {
        f.filename.ends_with("leaks.rs") && f.name.contains(case)
    })?;
    for g in grown.iter().filter(|g| g.frame.is_some()).take(3) {
        if let Some(f) = &g.frame {
            let file = f.filename.rsplit('/').next().unwrap_or(&f.filename);
            println!(
                "    leak at {file}:{}: +{} B in {} allocations",
                f.line, g.bytes, g.count
            );
        }
    }
    Ok(())
}

fn relative(values: Vec<u64>, start: u64) -> Vec<i64> {
    values
        .into_iter()
        .map(|v| v as i64 - start as i64)
        .collect()
}

/// Case 1: `losses.push(loss)` keeps each loss tensor and its graph alive.
fn keep_losses(device: Device) -> BoxResult<bool> {
    println!("case 1: keeping loss tensors (with their graphs) in a Vec vs keeping loss.item()");
    let model = Mlp::new(&WIDTHS, 7, device)?;
    let mut series = Vec::new();

    // (a) Evaluation with grad on (no backward): every loss keeps its whole
    // graph, whose saved tensors include each layer's activations.
    let start = memory_allocated(device)?;
    let mut kept: Vec<Var> = Vec::new();
    let mut values = Vec::new();
    let watch = strata::allocator(device)?.watch()?;
    for step in 0..STEPS {
        let (x, y) = batch(100 + step as u64, device)?;
        kept.push(mse(&model.forward(&x)?, &y)?);
        values.push(memory_allocated(device)?);
    }
    println!("  leak finder, eval keeping loss tensors:");
    print_leaks(&watch, device, "keep_losses")?;
    let before_drop = memory_allocated(device)?;
    drop(kept);
    let freed = before_drop - memory_allocated(device)?;
    series.push(relative(values, start));

    // (b) Training: backward released each graph's saved tensors, but the
    // kept loss tensors (and their released graphs) stay.
    // (c) Training, keeping only loss.item().
    for keep_tensor in [true, false] {
        let mut opt = Sgd::new(model.params(), 0.01, 0.9)?;
        let start = memory_allocated(device)?;
        let mut kept: Vec<Var> = Vec::new();
        let mut numbers: Vec<f32> = Vec::new();
        let mut values = Vec::new();
        let mut watch = None;
        for step in 0..STEPS {
            if step == 1 {
                watch = Some(strata::allocator(device)?.watch()?);
            }
            let (x, y) = batch(step as u64, device)?;
            opt.zero_grad(true)?;
            let loss = mse(&model.forward(&x)?, &y)?;
            loss.backward()?;
            opt.step()?;
            if keep_tensor {
                kept.push(loss);
            } else {
                numbers.push(loss.item::<f32>()?);
            }
            values.push(memory_allocated(device)?);
        }
        if let (true, Some(w)) = (keep_tensor, &watch) {
            println!("  leak finder, train keeping loss tensors:");
            print_leaks(w, device, "keep_losses")?;
        }
        drop(kept);
        drop(opt);
        model.params().iter().try_for_each(|p| p.zero_grad(true))?;
        series.push(relative(values, start));
    }
    table(
        &[
            "eval, Vec<Var> (grad on)",
            "train, Vec<Var>",
            "train, Vec<f32> (.item())",
        ],
        &series,
    );
    println!(
        "  dropping the {STEPS} kept eval losses frees {freed} B (their graphs' saved tensors)"
    );
    let mut ok = verdict("eval keeping loss tensors", &series[0], Trend::Grows);
    ok &= verdict("train keeping loss tensors", &series[1], Trend::Grows);
    ok &= verdict("train keeping loss.item()", &series[2], Trend::Flat);
    println!(
        "  measured: without backward each kept loss holds its graph's saved activations; after \
         backward (which released them) each kept loss still holds its own block"
    );
    Ok(ok)
}

/// The norm of all parameters' gradients.
fn grad_norm(params: &[Var]) -> BoxResult<f64> {
    let mut sq = 0.0f64;
    for p in params {
        if let Some(g) = p.grad() {
            sq += g.mul(&g)?.sum(None, false)?.item::<f32>()? as f64;
        }
    }
    Ok(sq.sqrt())
}

/// Case 2: without zero_grad, gradients accumulate into `.grad` in place.
fn skip_zero_grad(device: Device) -> BoxResult<bool> {
    println!("case 2: skipping zero_grad");
    println!(
        "  (learning rate 0, one fixed batch: every step computes the same gradient, so the \
         accumulation is exact)"
    );
    let (x, y) = batch(1, device)?;
    let mut series = Vec::new();
    let mut norms: Vec<Vec<f64>> = Vec::new();
    let mut after_zero = Vec::new();
    // 0: zero_grad(set_to_none = true); 1: zero_grad(false); 2: never.
    for mode in 0..3 {
        let model = Mlp::new(&WIDTHS, 11, device)?;
        let mut opt = Sgd::new(model.params(), 0.0, 0.0)?;
        let start = memory_allocated(device)?;
        let (mut values, mut n) = (Vec::new(), Vec::new());
        let mut low = 0;
        for _ in 0..STEPS {
            match mode {
                0 => opt.zero_grad(true)?,
                1 => opt.zero_grad(false)?,
                _ => {}
            }
            low = memory_allocated(device)? - start;
            let loss = mse(&model.forward(&x)?, &y)?;
            loss.backward()?;
            opt.step()?;
            values.push(memory_allocated(device)?);
            n.push(grad_norm(&model.params())?);
        }
        after_zero.push(low);
        series.push(relative(values, start));
        norms.push(n);
    }
    let labels = ["zero_grad(set_to_none)", "zero_grad(false)", "no zero_grad"];
    table(&labels, &series);
    println!("  |grad| after each step:");
    for (step, ((a, b), c)) in norms[0].iter().zip(&norms[1]).zip(&norms[2]).enumerate() {
        println!("  {:>4} {a:>28.4} {b:>28.4} {c:>28.4}", step + 1);
    }
    let mut ok = true;
    for (i, label) in labels.iter().enumerate() {
        ok &= verdict(label, &series[i], Trend::Flat);
    }
    let g1 = norms[0][0];
    let same = |v: &[f64]| v.iter().all(|n| (n - g1).abs() <= 1e-4 * g1);
    let accumulates = norms[2]
        .iter()
        .enumerate()
        .all(|(k, n)| (n - (k + 1) as f64 * g1).abs() <= 1e-3 * n);
    println!(
        "  without zero_grad |grad| after step k is k x the per-step gradient: {}",
        if accumulates {
            "yes -> gradient values accumulate, as stated"
        } else {
            "NO -> NOT as stated"
        }
    );
    println!(
        "  with zero_grad |grad| stays at the per-step value: {}",
        if same(&norms[0]) && same(&norms[1]) {
            "yes"
        } else {
            "NO"
        }
    );
    ok &= accumulates && same(&norms[0]) && same(&norms[1]);
    println!(
        "  measured: skipping zero_grad accumulates values in place, not memory; \
         set_to_none frees the gradients between steps (allocated after zero_grad: {} B with \
         set_to_none vs {} B with zeroing)",
        after_zero[0], after_zero[1]
    );
    ok &= after_zero[0] < after_zero[1];
    Ok(ok)
}

/// Case 3: an RNN-like loop carrying a hidden state, one backward per step.
fn rnn_hidden(device: Device) -> BoxResult<bool> {
    const B: usize = 32;
    const I: usize = 16;
    const H: usize = 128;
    println!("case 3: RNN-like loop carrying the hidden state h = relu(x_t Wx + h Wh + b), loss_t = mean(h), one backward per step");
    let param = |shape: &[usize], seed: u64| -> BoxResult<Var> {
        let t = Tensor::randn(shape, DType::F32, seed, device)?.mul(0.1)?;
        Ok(Var::parameter(t)?)
    };
    let (wx, wh) = (param(&[I, H], 1)?, param(&[H, H], 2)?);
    let b = Var::parameter(Tensor::zeros(&[H], DType::F32, device)?)?;
    let cell = |x: &Var, h: &Var| -> BoxResult<Var> {
        let a = x.matmul(&wx)?;
        let r = h.matmul(&wh)?;
        Ok(a.add(&r)?.add(&b)?.relu()?)
    };
    let input = |t: usize| -> BoxResult<Var> {
        Ok(Var::new(Tensor::randn(
            &[B, I],
            DType::F32,
            1000 + t as u64,
            device,
        )?))
    };
    let clear = || -> BoxResult<()> {
        for p in [&wx, &wh, &b] {
            p.zero_grad(true)?;
        }
        Ok(())
    };

    // Without detach and without retain_graph, step 2's backward reaches
    // step 1's released graph.
    let mut h = Var::new(Tensor::zeros(&[B, H], DType::F32, device)?);
    let mut failure = None;
    for t in 0..2 {
        h = cell(&input(t)?, &h)?;
        if let Err(e) = h.mean(None, false)?.backward() {
            failure = Some(e);
        }
    }
    drop(h);
    clear()?;
    let ok_error = matches!(failure, Some(AutogradError::GraphReleased { .. }));
    match &failure {
        Some(e) => println!("  without detach, step 2's backward fails: {e}"),
        None => println!("  without detach, step 2's backward did NOT fail"),
    }

    let mut series = Vec::new();
    for detach in [false, true] {
        let mut h = Var::new(Tensor::zeros(&[B, H], DType::F32, device)?);
        let start = memory_allocated(device)?;
        let mut values = Vec::new();
        let mut watch = None;
        for t in 0..STEPS {
            if t == 1 {
                watch = Some(strata::allocator(device)?.watch()?);
            }
            if detach {
                h = h.detach();
            }
            h = cell(&input(t)?, &h)?;
            let loss = h.mean(None, false)?;
            // Without detach the loop only runs with retain_graph (see above).
            loss.backward_with(None, !detach)?;
            values.push(memory_allocated(device)?);
        }
        if let (false, Some(w)) = (detach, &watch) {
            println!("  leak finder, RNN without detach:");
            print_leaks(w, device, "rnn_hidden")?;
        }
        drop(h);
        clear()?;
        series.push(relative(values, start));
    }
    table(
        &["no detach (retain_graph)", "h.detach() each step"],
        &series,
    );
    let mut ok = verdict("without detach", &series[0], Trend::Grows);
    ok &= verdict("with detach", &series[1], Trend::Flat);
    println!(
        "  measured: without detach every step's graph stays reachable from h, with the tensors \
         it saved (x_t is {} B, h_t is {} B); with detach only the current h is kept",
        B * I * 4,
        B * H * 4
    );
    Ok(ok && ok_error)
}
