"""pai-launch: a supervisor for PerforatedAI DistributedDataParallel training."""

__version__ = "0.1.0"
