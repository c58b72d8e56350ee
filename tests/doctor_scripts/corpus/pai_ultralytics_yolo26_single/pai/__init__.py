#
"""
Imports
"""
from .setup   import PerforatedRun, build_perforated_save_name
from .trainer import PerforatedDetectionTrainer

#
"""
Config
"""
__all__ = [
    'PerforatedDetectionTrainer',
    'PerforatedRun',
    'build_perforated_save_name',
]
