"""The explorer page (notebook 00) and the start-up cost model it prices with."""
