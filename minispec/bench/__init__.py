"""minispec.bench"""
