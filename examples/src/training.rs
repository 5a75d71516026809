//! Shared pieces of the training benchmarks (`gpt`, `memory_hungry`): a
//! small `--flag value` parser, the allocator figures of a run in PyTorch's
//! key names, and the median of step times.

use std::collections::HashMap;
use strata::Device;

/// `--name value` pairs from the command line, checked against the known names.
pub struct Flags {
    values: HashMap<String, String>,
}

impl Flags {
    /// Parses `args` (without the program name); every flag must be in
    /// `known` and have a value.
    pub fn parse(args: impl Iterator<Item = String>, known: &[&str]) -> Result<Flags, String> {
        let mut values = HashMap::new();
        let mut args = args.peekable();
        while let Some(a) = args.next() {
            let Some(name) = a.strip_prefix("--") else {
                return Err(format!("unexpected argument {a:?}; flags are --name value"));
            };
            if !known.contains(&name) {
                return Err(format!(
                    "unknown flag --{name}; known: --{}",
                    known.join(" --")
                ));
            }
            let Some(v) = args.next() else {
                return Err(format!("--{name} needs a value"));
            };
            values.insert(name.to_string(), v);
        }
        Ok(Flags { values })
    }

    /// The value of `--name`, or `default`.
    pub fn str(&self, name: &str, default: &str) -> String {
        self.values
            .get(name)
            .cloned()
            .unwrap_or_else(|| default.to_string())
    }

    /// The value of `--name` as a number, or `default`.
    pub fn num<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T, String> {
        match self.values.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| format!("--{name} {v:?} is not a valid number")),
        }
    }

    /// The device of `--device` (`cuda`, `cuda:N` or `cpu`), or `default`.
    pub fn device(&self, default: &str) -> Result<Device, String> {
        let s = self.str("device", default);
        Device::parse(&s).map_err(|e| format!("--device {s:?}: {e}"))
    }
}

/// How often blocks are checkpointed: `none` (0), `every` (1) or `every:K`.
pub fn parse_checkpoint(s: &str) -> Result<usize, String> {
    match s {
        "none" => Ok(0),
        "every" => Ok(1),
        _ => match s.strip_prefix("every:").map(str::parse::<usize>) {
            Some(Ok(k)) if k > 0 => Ok(k),
            _ => Err(format!(
                "--checkpoint {s:?}: expected none, every or every:K with K > 0"
            )),
        },
    }
}

/// The median of `v` (the upper one of an even count, as `statistics.median` averages;
/// here the mean of the two middle values, as Python does).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Peak allocated, peak reserved and the number of device allocations of
/// `device`'s allocator (PyTorch's `allocated_bytes.all.peak`,
/// `reserved_bytes.all.peak`, `num_device_alloc`).
pub fn peaks(device: Device) -> Result<(i64, i64, i64), strata::AllocError> {
    let st = strata::memory_stats(device)?;
    Ok((
        st.allocated_bytes.all().peak,
        st.reserved_bytes.all().peak,
        st.num_device_alloc,
    ))
}

/// Rounds to `digits` decimals (as Python's `round`, for the JSON line).
pub fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}
