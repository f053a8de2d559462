"""tilelab.kernels"""
