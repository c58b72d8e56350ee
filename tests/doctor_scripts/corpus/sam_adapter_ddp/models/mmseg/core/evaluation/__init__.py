from .class_names import get_classes, get_palette
from .eval_hooks import DistEvalHook, EvalHook
from .metrics import eval_metrics, mean_dice, mean_iou

__all__ = [
    'EvalHook', 'DistEvalHook', 'mean_dice', 'mean_iou', 'eval_metrics',
    'get_classes', 'get_palette'
]
