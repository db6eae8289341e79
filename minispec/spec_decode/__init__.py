"""minispec.spec_decode"""
