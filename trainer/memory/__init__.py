"""Memory plans of a run from the model's config.json alone (`trainer.memory.plan`), KV-cache sizing
(`trainer.memory.kv`) and the fake-tensor check of a plan against PyTorch (`trainer.memory.measure`)."""
