"""minispec.entrypoints"""
