"""The privacy budget ledger (DESIGN.md §6): budgets per unit and notion, the history, the
registered datasets, and where the ledger lives. Imports core (costs), sqltext and errors only."""
