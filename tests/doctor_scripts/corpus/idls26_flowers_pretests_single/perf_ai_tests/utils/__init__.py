"""Utility helpers for this project (training, PAI, etc.)."""

