"""The trainer's configuration: `TrainConfig` (`scalerl.trainer.config.train`), its resolution from file, presets,
flags and overrides (`scalerl.trainer.config.resolve`), its presets, data sections and docs."""
