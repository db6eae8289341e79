"""minispec.worker"""
