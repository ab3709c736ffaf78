"""Runners over downloaded conversational datasets (LongMemEval, LoCoMo); both need a model."""
