"""minispec.compilation"""
