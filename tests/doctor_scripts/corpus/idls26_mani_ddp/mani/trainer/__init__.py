"""Trainer package: train/eval loops and PAI switch helpers."""

