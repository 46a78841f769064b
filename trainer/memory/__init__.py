"""Memory plans of a run from the model's config.json alone (`scalerl.trainer.memory.plan`), KV-cache sizing
(`scalerl.trainer.memory.kv`) and the fake-tensor check of a plan against PyTorch (`scalerl.trainer.memory.measure`)."""
