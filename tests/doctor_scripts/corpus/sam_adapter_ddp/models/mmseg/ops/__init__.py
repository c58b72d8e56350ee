from .encoding import Encoding
from .wrappers import Upsample, resize

__all__ = ['Upsample', 'resize', 'Encoding']
