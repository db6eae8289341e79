"""minispec.engine"""
