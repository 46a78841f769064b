"""The ScaleRL trainer: losses, advantages, engines, PipelineRL runtime, curve fits.

Importing `trainer` imports neither torch nor vLLM; submodules that need them import them.
"""
