from .collect_env import collect_env
from .logger import get_root_logger, print_log

__all__ = ['get_root_logger', 'collect_env', 'print_log']
