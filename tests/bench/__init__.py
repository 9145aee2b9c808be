"""Benchmarks (run with scripts/bench.sh; not collected by pytest)."""
