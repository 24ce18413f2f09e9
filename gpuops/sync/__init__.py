"""Checked, resumable sync: the pieces behind `gpuops push`, `pull` and `verify`.

A sync is planned from two manifests (relative path, kind, size, sha256), checked against the
destination's free bytes and inodes, carried by rsync or SFTP with resume and bounded retries,
and then proven by comparing manifests again. Success means verified, never "the copy ran".

    rules      what is sent: .git, .gpuopsignore and --exclude, plus gpuops' own leftovers
    tree       local manifests (the on-box walker, imported) and the request sent to the box
    plan       pure: what to send, what is extra, what differs (the comparison verify reports);
               the box's manifest entries are checked here before anything uses them
    budget     pure: bytes and inodes needed vs free, with a margin
    retry      bounded exponential backoff
    outcome    what an engine reports: attempts, bytes sent and reused, how it ended
    rsync      the rsync engine: argv (over the target's own ssh command line), progress and stats
               parsing, exit-code classes, retries
    sftp       the SFTP engine: per-file resume from the partial size, atomic rename
    stripes    pure: how many streams a measured link pays for, big files cut into ranges, lanes
    lanes      one stream's own SSH connection, and the link's measurement (round trip, rate)
    ranges     one range over a lane (resumable part files), a file's ranges joined in place
    striped    the engine wrapping rsync's: one stream, or several lanes at once
    lock       one writer per destination: pull's here, push's on the box (gpuops.onbox.sync.destlock)
    crlf       shell scripts with CRLF line endings (U26)
    progress   a rich progress bar for people; nothing for machines
"""
