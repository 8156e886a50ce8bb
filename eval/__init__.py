"""Evaluation scripts and benchmarks (run as modules from the repository root)."""
