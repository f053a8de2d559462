"""tilelab.perf"""
