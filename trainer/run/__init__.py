"""One training run: setup, the loop and its phases, validation, the run log, the sampling runtime."""
