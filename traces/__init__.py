"""Bundled Parallel Workloads Archive logs (data only; see README.md in this folder)."""
