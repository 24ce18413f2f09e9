"""The resident helper: runs shipped entries without a new exec channel each time, and its wire format.
"""
