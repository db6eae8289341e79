"""minispec.core.sched"""
