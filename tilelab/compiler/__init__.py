"""tilelab.compiler"""
