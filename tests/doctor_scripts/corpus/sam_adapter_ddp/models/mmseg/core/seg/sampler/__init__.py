from .base_pixel_sampler import BasePixelSampler
from .ohem_pixel_sampler import OHEMPixelSampler

__all__ = ['BasePixelSampler', 'OHEMPixelSampler']
