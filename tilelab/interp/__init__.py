"""tilelab.interp"""
