"""The auto-tuner: search space, search strategies, cost model, database, coordinator and CLI."""
