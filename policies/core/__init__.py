"""The pieces every policy family shares: the registry's types (:mod:`.registry`), the
kernel compiler (:mod:`.jit`), queue orders (:mod:`.order`), the backfilling core and
EASY's rules (:mod:`.backfill`), the SLA bound (:mod:`.bound`), the what-if loop's pieces
(:mod:`.loop`), the index of a queue kept by position (:mod:`.index`), scoring and the
closest choice (:mod:`.score`), and the optional parts of the policy protocol
(:mod:`.base`)."""
