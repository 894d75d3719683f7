"""Offline evaluation and fitting over the rating core: match files replayed, predictions
scored, parameters fitted (``ratings evaluate``, ``ratings fit`` and a ladder's fit job)."""
