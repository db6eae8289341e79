"""minispec.attention"""
