"""The power-budget policies of overprovisioned machines: the shared job model, fit test
and budget (:mod:`.overprovision`), RMAP's three variants (:mod:`.rmap`) and PARM
(:mod:`.parm`)."""
