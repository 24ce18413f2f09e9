"""The box half of a checked sync: manifests, the digest cache, landing and the destination lock.
"""
