"""The Noise ensemble tab: many runs of stochastic logits, their mean and spread."""
