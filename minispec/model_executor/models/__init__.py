"""minispec.model_executor.models"""
