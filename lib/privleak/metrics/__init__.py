"""Leakage and utility metrics: one submodule per family of definitions."""
