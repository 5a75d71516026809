//! Allocator configuration in PyTorch's `key:value,key:value` syntax.
//!
//! The string comes from the `STRATA_ALLOC_CONF` environment variable (read when a
//! device's allocator is first created) or from code through
//! [`AllocatorConfig::parse`]. Keys, with PyTorch's meanings:
//!
//! | key | accepted | default |
//! |---|---|---|
//! | `expandable_segments` | `True`/`False` | on where the driver supports virtual memory |
//! | `max_split_size_mb` | integer MiB >= 20 | unlimited |
//! | `roundup_power2_divisions` | a power of two, or `[K:v,...,>:v]` (K MiB a power of two, v a power of two or 0) | off |
//! | `garbage_collection_threshold` | number strictly between 0 and 1 (needs a memory fraction) | off |
//! | `per_process_memory_fraction` | number in [0, 1] | 1 (no limit) |
//!
//! ```
//! use strata_alloc::AllocatorConfig;
//! let c = AllocatorConfig::parse("expandable_segments:False,max_split_size_mb:128").unwrap();
//! assert_eq!(c.expandable_segments, Some(false));
//! assert_eq!(c.max_split_size, Some(128 << 20));
//! let e = AllocatorConfig::parse("max_split_size_mb:4").unwrap_err();
//! assert!(e.to_string().contains("max_split_size_mb"));
//! ```

use std::fmt;

/// The environment variable holding the configuration string.
pub const ENV_VAR: &str = "STRATA_ALLOC_CONF";

/// Number of power-of-two intervals that `roundup_power2_divisions` covers
/// (1 MiB … 64 GiB and above).
pub const ROUNDUP_INTERVALS: usize = 16;

/// A configuration string that could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A key strata does not know.
    #[error("unknown key '{key}' in allocator configuration; accepted keys: expandable_segments, max_split_size_mb, roundup_power2_divisions, garbage_collection_threshold, per_process_memory_fraction")]
    UnknownKey {
        /// The key as written.
        key: String,
    },
    /// A known key with a value out of range or of the wrong form.
    #[error("bad value '{value}' for allocator configuration key '{key}': {accepted}")]
    BadValue {
        /// The key.
        key: &'static str,
        /// The value as written.
        value: String,
        /// What the key accepts.
        accepted: &'static str,
    },
    /// A piece of the string that is not `key:value`.
    #[error("malformed allocator configuration near '{near}': expected comma-separated key:value pairs, e.g. expandable_segments:True,max_split_size_mb:128")]
    Malformed {
        /// The text that could not be split.
        near: String,
    },
}

/// Allocator settings. `Default` gives strata's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct AllocatorConfig {
    /// `Some(true)`/`Some(false)` force expandable segments on or off; `None`
    /// (the default) turns them on wherever the driver supports virtual memory.
    pub expandable_segments: Option<bool>,
    /// Blocks of at least this many bytes are never split; `None` is unlimited.
    pub max_split_size: Option<u64>,
    /// Divisions per power-of-two interval, index 0 for sizes below 2 MiB, index
    /// i for `[2^(20+i), 2^(21+i))`; 0 or 1 means plain 512-byte rounding.
    pub roundup_power2_divisions: [u64; ROUNDUP_INTERVALS],
    /// Reclaim cached blocks once usage passes this fraction of the allowed
    /// memory (needs `per_process_memory_fraction`).
    pub garbage_collection_threshold: Option<f64>,
    /// The fraction of the device's memory this process may reserve.
    pub per_process_memory_fraction: Option<f64>,
}

impl Default for AllocatorConfig {
    fn default() -> Self {
        AllocatorConfig {
            expandable_segments: None,
            max_split_size: None,
            roundup_power2_divisions: [0; ROUNDUP_INTERVALS],
            garbage_collection_threshold: None,
            per_process_memory_fraction: None,
        }
    }
}

impl AllocatorConfig {
    /// Reads `STRATA_ALLOC_CONF`; defaults when it is unset or empty.
    pub fn from_env() -> Result<AllocatorConfig, ConfigError> {
        match std::env::var(ENV_VAR) {
            Ok(s) => AllocatorConfig::parse(&s),
            Err(_) => Ok(AllocatorConfig::default()),
        }
    }

    /// Parses a configuration string; keys not given keep their defaults.
    pub fn parse(s: &str) -> Result<AllocatorConfig, ConfigError> {
        let mut c = AllocatorConfig::default();
        c.apply(s)?;
        Ok(c)
    }

    /// Applies the keys of `s` on top of this configuration.
    pub fn apply(&mut self, s: &str) -> Result<(), ConfigError> {
        for (key, value) in split_pairs(s)? {
            match key.as_str() {
                "expandable_segments" => {
                    self.expandable_segments = Some(parse_bool("expandable_segments", &value)?)
                }
                "max_split_size_mb" => {
                    let mb = value
                        .parse::<u64>()
                        .ok()
                        .filter(|&v| v >= 20)
                        .ok_or_else(|| ConfigError::BadValue {
                            key: "max_split_size_mb",
                            value: value.clone(),
                            accepted: "an integer number of MiB, at least 20",
                        })?;
                    self.max_split_size = Some(mb << 20);
                }
                "roundup_power2_divisions" => {
                    self.roundup_power2_divisions = parse_divisions(&value)?
                }
                "garbage_collection_threshold" => {
                    let v = value
                        .parse::<f64>()
                        .ok()
                        .filter(|v| *v > 0.0 && *v < 1.0)
                        .ok_or_else(|| ConfigError::BadValue {
                            key: "garbage_collection_threshold",
                            value: value.clone(),
                            accepted: "a number strictly between 0 and 1, e.g. 0.8",
                        })?;
                    self.garbage_collection_threshold = Some(v);
                }
                "per_process_memory_fraction" => {
                    let v = value
                        .parse::<f64>()
                        .ok()
                        .filter(|v| (0.0..=1.0).contains(v))
                        .ok_or_else(|| ConfigError::BadValue {
                            key: "per_process_memory_fraction",
                            value: value.clone(),
                            accepted: "a number between 0 and 1, e.g. 0.5",
                        })?;
                    self.per_process_memory_fraction = Some(v);
                }
                _ => return Err(ConfigError::UnknownKey { key }),
            }
        }
        Ok(())
    }

    /// Divisions in force for a request of `size` bytes.
    pub fn divisions_for(&self, size: u64) -> u64 {
        let log = 63 - size.max(1).leading_zeros() as i64;
        let idx = (log - 20).clamp(0, ROUNDUP_INTERVALS as i64 - 1) as usize;
        self.roundup_power2_divisions[idx]
    }
}

impl fmt::Display for AllocatorConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        match self.expandable_segments {
            Some(true) => parts.push("expandable_segments:True".to_string()),
            Some(false) => parts.push("expandable_segments:False".to_string()),
            None => {}
        }
        if let Some(m) = self.max_split_size {
            parts.push(format!("max_split_size_mb:{}", m >> 20));
        }
        if self.roundup_power2_divisions.iter().any(|&d| d > 1) {
            let list: Vec<String> = self
                .roundup_power2_divisions
                .iter()
                .enumerate()
                .map(|(i, d)| format!("{}:{d}", 1u64 << i))
                .collect();
            parts.push(format!("roundup_power2_divisions:[{}]", list.join(",")));
        }
        if let Some(g) = self.garbage_collection_threshold {
            parts.push(format!("garbage_collection_threshold:{g}"));
        }
        if let Some(p) = self.per_process_memory_fraction {
            parts.push(format!("per_process_memory_fraction:{p}"));
        }
        if parts.is_empty() {
            write!(f, "default")
        } else {
            write!(f, "{}", parts.join(","))
        }
    }
}

fn parse_bool(key: &'static str, value: &str) -> Result<bool, ConfigError> {
    match value {
        "True" | "true" => Ok(true),
        "False" | "false" => Ok(false),
        _ => Err(ConfigError::BadValue {
            key,
            value: value.to_string(),
            accepted: "True or False",
        }),
    }
}

/// Splits `a:1,b:[x:1,y:2]` into `(a, 1)`, `(b, [x:1,y:2])`; whitespace is ignored.
fn split_pairs(s: &str) -> Result<Vec<(String, String)>, ConfigError> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    let mut pieces = Vec::new();
    for (i, ch) in s.char_indices() {
        match ch {
            '[' => depth += 1,
            ']' => {
                depth = depth.checked_sub(1).ok_or_else(|| ConfigError::Malformed {
                    near: s[start..].to_string(),
                })?
            }
            ',' if depth == 0 => {
                pieces.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(ConfigError::Malformed {
            near: s[start..].to_string(),
        });
    }
    pieces.push(&s[start..]);
    for p in pieces.into_iter().filter(|p| !p.is_empty()) {
        let (k, v) = p.split_once(':').ok_or_else(|| ConfigError::Malformed {
            near: p.to_string(),
        })?;
        if k.is_empty() || v.is_empty() {
            return Err(ConfigError::Malformed {
                near: p.to_string(),
            });
        }
        out.push((k.to_string(), v.to_string()));
    }
    Ok(out)
}

fn parse_divisions(value: &str) -> Result<[u64; ROUNDUP_INTERVALS], ConfigError> {
    const ACCEPTED: &str = "a power of two (e.g. 4), or a list [K:v,...,>:v] where K is a size in MiB that is a power of two and v a power of two or 0";
    let bad = || ConfigError::BadValue {
        key: "roundup_power2_divisions",
        value: value.to_string(),
        accepted: ACCEPTED,
    };
    let pow2_or_zero = |v: &str| -> Result<u64, ConfigError> {
        let n = v.parse::<u64>().map_err(|_| bad())?;
        if n == 0 || n.is_power_of_two() {
            Ok(n)
        } else {
            Err(bad())
        }
    };
    let mut out = [0u64; ROUNDUP_INTERVALS];
    if let Some(list) = value.strip_prefix('[') {
        let list = list.strip_suffix(']').ok_or_else(bad)?;
        let mut last_index: Option<usize> = None;
        let mut first = true;
        for item in list.split(',') {
            let (k, v) = item.split_once(':').ok_or_else(bad)?;
            let v = pow2_or_zero(v)?;
            if k == ">" {
                let from = last_index.map(|i| i + 1).unwrap_or(0);
                for slot in out.iter_mut().skip(from) {
                    *slot = v;
                }
                last_index = Some(ROUNDUP_INTERVALS - 1);
                continue;
            }
            let mb = k.parse::<u64>().map_err(|_| bad())?;
            if !mb.is_power_of_two() {
                return Err(bad());
            }
            let idx = (mb.trailing_zeros() as usize).min(ROUNDUP_INTERVALS - 1);
            if let Some(li) = last_index {
                if idx <= li && !first {
                    return Err(bad());
                }
            }
            if first {
                for slot in out.iter_mut().take(idx) {
                    *slot = v;
                }
                first = false;
            }
            out[idx] = v;
            last_index = Some(idx);
        }
        Ok(out)
    } else {
        let v = pow2_or_zero(value)?;
        Ok([v; ROUNDUP_INTERVALS])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_key() {
        let c = AllocatorConfig::parse(
            "expandable_segments:True, max_split_size_mb:64,roundup_power2_divisions:4,garbage_collection_threshold:0.6,per_process_memory_fraction:0.5",
        )
        .unwrap();
        assert_eq!(c.expandable_segments, Some(true));
        assert_eq!(c.max_split_size, Some(64 << 20));
        assert_eq!(c.roundup_power2_divisions, [4; 16]);
        assert_eq!(c.garbage_collection_threshold, Some(0.6));
        assert_eq!(c.per_process_memory_fraction, Some(0.5));
    }

    #[test]
    fn division_lists_fill_intervals() {
        let c = AllocatorConfig::parse("roundup_power2_divisions:[256:1,512:2,>:8]").unwrap();
        // 256 MiB is interval 8; the first key fills everything below it.
        assert_eq!(c.roundup_power2_divisions[0], 1);
        assert_eq!(c.roundup_power2_divisions[8], 1);
        assert_eq!(c.roundup_power2_divisions[9], 2);
        assert_eq!(c.roundup_power2_divisions[10], 8);
        assert_eq!(c.roundup_power2_divisions[15], 8);
        assert_eq!(c.divisions_for(600 << 20), 2);
    }

    #[test]
    fn bad_strings_name_the_key() {
        for (s, key) in [
            ("expandable_segments:yes", "expandable_segments"),
            ("max_split_size_mb:abc", "max_split_size_mb"),
            (
                "garbage_collection_threshold:1.5",
                "garbage_collection_threshold",
            ),
            (
                "per_process_memory_fraction:-1",
                "per_process_memory_fraction",
            ),
            ("roundup_power2_divisions:3", "roundup_power2_divisions"),
            ("roundup_power2_divisions:[3:2]", "roundup_power2_divisions"),
            ("no_such_key:1", "no_such_key"),
        ] {
            let e = AllocatorConfig::parse(s).unwrap_err();
            assert!(e.to_string().contains(key), "{s}: {e}");
        }
        assert!(matches!(
            AllocatorConfig::parse("expandable_segments"),
            Err(ConfigError::Malformed { .. })
        ));
        assert!(matches!(
            AllocatorConfig::parse("roundup_power2_divisions:[1:2"),
            Err(ConfigError::Malformed { .. })
        ));
    }

    #[test]
    fn display_round_trips() {
        let c = AllocatorConfig::parse("expandable_segments:False,max_split_size_mb:40").unwrap();
        assert_eq!(AllocatorConfig::parse(&c.to_string()).unwrap(), c);
        assert_eq!(AllocatorConfig::default().to_string(), "default");
    }
}
