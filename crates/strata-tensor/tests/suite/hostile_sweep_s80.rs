//! Hostile inputs to session 79's linalg, shape, statistics and nn ops against PyTorch 2.15 (session 80); filled in by its work.
