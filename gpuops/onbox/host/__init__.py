"""The box as it is: processes, kernel state, GPUs, disks, cgroups and the job directory contract.
The bottom of the on-box code: nothing here imports another on-box package.
"""
