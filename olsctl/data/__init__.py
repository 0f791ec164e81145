"""Data files derived from public measurements (see the license files here)."""
