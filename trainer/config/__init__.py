"""The trainer's configuration: `TrainConfig` (`trainer.config.train`), its presets, data sections and docs."""
