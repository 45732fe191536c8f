"""Representations Φ of a dataset and the one builder of text models."""
