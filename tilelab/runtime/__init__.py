"""tilelab.runtime"""
