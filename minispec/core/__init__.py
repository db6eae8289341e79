"""minispec.core"""
