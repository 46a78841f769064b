"""Curriculum: the DuckDB pass-rate ledger, the ScaleRL data filters and the domain-mixing sampler."""
