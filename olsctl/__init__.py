"""olsctl: trace-driven batch-scheduling simulation with an online-simulation controller."""

from __future__ import annotations

__version__ = "0.1.0"
