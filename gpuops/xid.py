"""NVIDIA Xid codes: what each means and what a tenant should do about it, in one table.

The preflight kernel-log check, diagnose and triage all decide from this table, so a code that
fails a box in preflight is also the code that explains a dead run and names a log's failure.

kind
    fatal         a hardware, firmware or driver fault: the GPU needs a reset, the node a reboot,
                  or the card is failing. A tenant can do none of that: stop and rent another box.
    application   raised by the application's own fault (an illegal address, a killed context);
                  the GPU stays healthy. Fix or re-run the job.
    other         informational or ambiguous (a repair recorded for the next reset, a link event
                  whose severity depends on its sub-code); worth a look, not a verdict.
A code missing here (newer drivers add codes) is `other`, reported with its raw line.
"""

from collections import namedtuple

GOTCHA = "U22"
FATAL, APPLICATION, OTHER = "fatal", "application", "other"

ACTIONS = {
    FATAL: "stop this instance and rent another box: a tenant cannot reset the GPU, reboot the host or repair "
           "the card",
    APPLICATION: "fix or re-run the job (a bad kernel, an illegal memory access, a killed process); if the same "
                 "Xid recurs across different jobs on one GPU, rent another box",
    OTHER: "look the code up in NVIDIA's Xid catalog; rent another box if it repeats",
}


class Xid(namedtuple("Xid", ("code", "name", "meaning", "kind", "action"))):
    __slots__ = ()

    @property
    def fatal(self) -> bool:
        return self.kind == FATAL

    @property
    def todo(self) -> str:
        return self.action or ACTIONS[self.kind]


# `action` defaults the Python 3.6 way (namedtuple's defaults= is 3.7): triage's scan reads this table
# on the box too (gpuops.onbox.BELOW), where python3 may be 3.6.
Xid.__new__.__defaults__ = ("",)


def _x(code, name: str, meaning, kind, action=""):
    return Xid(code, name, meaning, kind, action)


TABLE = {x.code: x for x in (
    _x(8, "FIFO_IDLE_TIMEOUT", "the GPU stopped processing a channel", OTHER),
    _x(13, "GR_EXCEPTION", "graphics engine exception: an SM warp fault, illegal instruction or address", APPLICATION),
    _x(31, "MMU_FAULT", "GPU memory page fault: the application touched an address it does not own", APPLICATION),
    _x(32, "PBDMA_ERROR", "an invalid or corrupted push buffer from the application", APPLICATION),
    _x(38, "FECS_WATCHDOG", "driver firmware watchdog timeout", OTHER),
    _x(43, "RESET_CHANNEL", "the GPU stopped processing after the application hit a fault", APPLICATION),
    _x(44, "GR_FAULT_CTXSW", "graphics engine fault during a context switch", OTHER),
    _x(45, "PREEMPTIVE_REMOVAL", "the driver tore down the channels of a killed application", APPLICATION,
       "a footprint of a killed or crashed process, not a cause: look at what killed it (OOM, a signal, an "
       "earlier Xid)"),
    _x(46, "GPU_TIMEOUT", "the GPU stopped processing", FATAL),
    _x(48, "ECC_DBE", "double-bit (uncorrectable) ECC memory error", FATAL),
    _x(54, "AUX_POWER", "auxiliary power is not connected: the GPU runs at reduced clocks", FATAL),
    _x(61, "PMU_BREAKPOINT", "internal micro-controller breakpoint", FATAL),
    _x(62, "PMU_HALT", "internal micro-controller halted", FATAL),
    _x(63, "DRAM_RETIREMENT_EVENT", "a memory row or page was marked for retirement; it takes effect at the next "
       "GPU reset", OTHER, "nvidia-smi -q -d ECC   # a repair is pending until the GPU is reset; with Xid 48 or "
       "64 beside it, rent another box"),
    _x(64, "DRAM_RETIREMENT_FAILURE", "retiring or remapping a failing memory row failed", FATAL),
    _x(68, "NVDEC_EXCEPTION", "video decoder exception", APPLICATION),
    _x(69, "GR_CLASS_ERROR", "graphics engine class error", APPLICATION),
    _x(74, "NVLINK_ERROR", "NVLink error", FATAL),
    _x(79, "FALLEN_OFF_BUS", "the GPU has fallen off the bus and no longer answers", FATAL),
    _x(92, "EXCESSIVE_SBE", "a high rate of single-bit ECC errors", OTHER,
       "nvidia-smi -q -d ECC   # correctable now, but a sign of wearing memory: rent another box if it climbs"),
    _x(93, "INFOROM_ERASE_LIMIT", "the InfoROM erase limit was exceeded", OTHER),
    _x(94, "CONTAINED_ECC", "an uncorrectable memory error contained to one application, which was killed",
       FATAL),
    _x(95, "UNCONTAINED_ECC", "an uncontained memory error: every application on the GPU is affected", FATAL),
    _x(109, "CTXSW_TIMEOUT", "a context switch timed out", APPLICATION),
    _x(110, "SEC_FAULT", "security fault", FATAL),
    _x(119, "GSP_RPC_TIMEOUT", "the GSP firmware did not answer an RPC", FATAL),
    _x(120, "GSP_ERROR", "GSP firmware error", FATAL),
    _x(121, "C2C_ERROR", "chip-to-chip link error", OTHER),
    _x(136, "LINK_TRAINING_FAIL", "NVLink link training failed", FATAL),
    _x(137, "NVLINK_PRIV_ERR", "NVLink privilege error", OTHER),
    _x(140, "ECC_ESCAPE", "an uncorrectable ECC error escaped containment", FATAL),
    _x(143, "GPU_INIT_ERROR", "the GPU failed to initialise", FATAL),
    *(_x(code, "NVLINK5_ERROR", "NVLink5 error; its severity depends on the unit and sub-code", OTHER)
      for code in range(144, 151)),
    _x(151, "KEY_ROTATION_ERROR", "confidential-computing key rotation failed", FATAL),
    _x(154, "RECOVERY_ACTION", "the GPU's recovery action changed (the line names the new action)", OTHER,
       "dmesg | grep -i 'recovery action'   # 'Reset' or 'Reboot' there means the GPU is unusable until the "
       "provider acts: rent another box"),
    _x(155, "NVLINK_SW_ERROR", "software-defined NVLink error", FATAL),
    _x(156, "RESOURCE_RETIREMENT_EVENT", "a resource was retired; it takes effect at the next GPU reset", OTHER),
    _x(157, "RESOURCE_RETIREMENT_FAILURE", "retiring a failing resource failed", FATAL),
    _x(158, "GPU_FATAL_TIMEOUT", "fatal GPU timeout", FATAL),
    _x(159, "CHI_NON_DATA_ERROR", "chip interconnect error", OTHER),
    _x(167, "PCIE_FATAL_TIMEOUT", "fatal PCIe timeout", FATAL),
    _x(168, "REDUCED_MEMORY", "errors in a write-protected region reduced the usable GPU memory", FATAL),
    _x(169, "SEC2_HALT", "internal micro-controller halted", FATAL),
    _x(171, "DRAM_UNCORRECTABLE", "uncorrectable DRAM error (details of an Xid 48)", FATAL),
    _x(172, "SRAM_UNCORRECTABLE", "uncorrectable SRAM error (details of an Xid 48)", FATAL),
)}


def lookup(code) -> Xid:
    """The table's entry for `code`; an unknown code is `other`."""
    try:
        code = int(code)
    except (TypeError, ValueError):
        code = -1
    return TABLE.get(code) or Xid(code, "UNKNOWN", "a code this table does not know (a newer driver?)", OTHER)


def is_fatal(code) -> bool:
    return lookup(code).fatal
