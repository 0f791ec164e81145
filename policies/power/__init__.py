"""The power-aware policies: naive capping (:mod:`.capping`, with what the family shares),
Wallace et al.'s window knapsack and the greedy knapsack (:mod:`.knapsack`), EASY with
power checks (:mod:`.easy_power`) and the power verifications they call (:mod:`.verify`)."""
