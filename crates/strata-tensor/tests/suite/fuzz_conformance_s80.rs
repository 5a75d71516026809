//! Random tensor programs in the conformance format against PyTorch 2.15 (session 80); filled in by its work.
