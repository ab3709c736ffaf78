"""Seeded, pure-Python generators of the paper's benchmark inputs (no Django import)."""
