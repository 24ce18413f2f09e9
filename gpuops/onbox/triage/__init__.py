"""A job's log read and judged, on the box and here alike: triage's classifier (its entry points in
logtriage: classify_bytes, triage_file ...), the progress policy (steps), the escapes removed before a
line is read, the log's excerpt and the supervisor's verdict on a failed attempt (logclass), and
whether that attempt is worth another (retrypolicy).

This __init__ stays empty: every module of the package imports it first, and the supervisor's
progress rule must not load the classifier (nor a light call's subprocess) to read a step line.
"""
