//! Benchmarks for strata; see `benches/`.
