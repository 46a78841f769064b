"""One training run: setup, the loop and its phases (the zero-variance ones in `zero_variance`), validation,
the run log, the compute clock."""
