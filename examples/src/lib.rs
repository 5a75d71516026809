//! Examples for strata; see `examples/`.
