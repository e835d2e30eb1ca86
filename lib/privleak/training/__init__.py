"""Model training: tiny-family pretraining, fine-tuning (DP and non-DP)."""
