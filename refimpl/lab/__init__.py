"""The measuring half's newer modules (refimpl conform); the mechanism never imports them."""
