"""tilelab.lab"""
