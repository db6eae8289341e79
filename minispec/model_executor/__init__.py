"""minispec.model_executor"""
