"""Power: job power profiles, the machine power and energy, power caps."""
