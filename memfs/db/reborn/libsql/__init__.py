"""IronClaw's Reborn layout in a libSQL file (``reborn-local-dev.db``): the rows (``rows``)
under ``RebornStore``, and the narrow stores (``stores``)."""
