from .builder import build_pixel_sampler
from .sampler import BasePixelSampler, OHEMPixelSampler

__all__ = ['build_pixel_sampler', 'BasePixelSampler', 'OHEMPixelSampler']
