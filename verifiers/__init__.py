"""Verifiers: score model completions (math, code) into `scalerl_env.records.Verdict`s.

Model output is hostile input: verifiers never raise on it; every failure has a status.
"""
